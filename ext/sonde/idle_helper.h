// idle_helper.h: samples when no thread holds the GVL (everyone sleeping or
// blocked), so that waiting threads still get wall time. A Ruby thread that
// waits, without the GVL, for the trigger thread to ask; then takes the GVL
// like any thread and samples. The trigger thread never waits for the GVL.
#ifndef SONDE_IDLE_HELPER_H
#define SONDE_IDLE_HELPER_H

#include "profiler.h"

// Starts the helper thread (with the GVL). Returns Qnil if it could not be created.
VALUE idle_helper_start(sonde_profiler *profiler);

// From the trigger thread (no GVL): asks for one sampling pass. Requests
// made while one is pending are merged. Never blocks for long.
void idle_helper_request_from_trigger(sonde_profiler *profiler);

// Wakes the helper so that it sees stop_requested and exits.
void idle_helper_wake_for_stop(sonde_profiler *profiler);

#endif
