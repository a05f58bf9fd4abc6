// run.c: the active run (see run.h for who may write it and when). Read
// from signal handlers and threads without the GVL, hence atomic.
#include "run.h"

static sonde_run *active_run;

sonde_run *run_active(void) { return __atomic_load_n(&active_run, __ATOMIC_ACQUIRE); }

void run_set_active(sonde_run *run) { __atomic_store_n(&active_run, run, __ATOMIC_RELEASE); }
