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

#endif
