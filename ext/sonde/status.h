// status.h: how the core's fallible operations say what went wrong, so the
// Ruby side picks the exception class from a code, not from a message.
#ifndef SONDE_STATUS_H
#define SONDE_STATUS_H

typedef enum {
  SONDE_OK = 0,
  SONDE_SIGNAL_CONFLICT, // another library's SIGPROF handler is installed
  SONDE_SIGNAL_FAILED,   // sigaction failed
  SONDE_THREAD_FAILED,   // a thread of Sonde's could not be started
  SONDE_NO_MEMORY,
} sonde_status;

#endif
