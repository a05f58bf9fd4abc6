// run.c: the active run (see run.h for who may write it and when). Read
// from signal handlers and threads without the GVL, hence atomic.
#include "run.h"

#include "shared.h"

static sonde_run *active_run;

sonde_run *run_active(void) { return shared_load_acquire(&active_run); }

void run_set_active(sonde_run *run) { shared_store_release(&active_run, run); }
