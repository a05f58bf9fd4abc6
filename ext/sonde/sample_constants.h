// sample_constants.h: constants of a recorded sample that the modules which
// fill samples (alloc_source.c, labels.c) and the one which exports them
// (profile_export.c) share. Constants only and no includes, so every module
// can include it without including another's interface (which closed an
// include circle: alloc_source -> labels -> profile_export -> alloc_source).
#ifndef SONDE_SAMPLE_CONSTANTS_H
#define SONDE_SAMPLE_CONSTANTS_H

// The most labels of one label set: the exporter writes at most this many
// per sample (profile_export.c), and labels.c refuses to load when the Ruby
// side's Labels::MAX_LABELS is above it.
#define SAMPLE_MAX_LABELS 16

// The object class of the allocation samples that stand for lost ones
// (their class is unknown); never a class's VALUE (those are 8-byte
// aligned), and above 0, which means "not an allocation sample".
#define SAMPLE_CLASS_UNKNOWN 1
// The object class of the allocation samples of the VM's own objects (an
// imemo, a node: no class to name). Not 0: a sample keyed with class 0 is
// a time sample, and an allocation of an imemo inside Class#new merged
// into the CPU sample of that very stack, which then read as an
// allocation of "(VM internal)" (1 run in 7 of allocation_test on 3.3).
#define SAMPLE_CLASS_VM_INTERNAL 2
// Object classes above this one are a Ruby class's VALUE (GC-marked).
#define SAMPLE_CLASS_LAST_SENTINEL SAMPLE_CLASS_VM_INTERNAL

#endif
