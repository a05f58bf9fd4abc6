// pprof_fields.h: the field numbers of profile.proto (package
// perftools.profiles), the messages Sonde writes (pprof_builder.c) and
// rewrites (pprof_rename.c). Each is the proto's field name; its proto type
// is in the comment where the wire type is not obvious from the name.
#ifndef SONDE_PPROF_FIELDS_H
#define SONDE_PPROF_FIELDS_H

// message Profile
enum profile_field {
  PROFILE_SAMPLE_TYPE = 1,          // repeated ValueType
  PROFILE_SAMPLE = 2,               // repeated Sample
  PROFILE_LOCATION = 4,             // repeated Location
  PROFILE_FUNCTION = 5,             // repeated Function
  PROFILE_STRING_TABLE = 6,         // repeated string
  PROFILE_TIME_NANOS = 9,           // int64
  PROFILE_DURATION_NANOS = 10,      // int64
  PROFILE_PERIOD_TYPE = 11,         // ValueType
  PROFILE_PERIOD = 12,              // int64
  PROFILE_COMMENT = 13,             // repeated int64 (string indexes)
  PROFILE_DEFAULT_SAMPLE_TYPE = 14, // int64 (a string index)
};
// message ValueType: string indexes
enum value_type_field { VALUE_TYPE_TYPE = 1, VALUE_TYPE_UNIT = 2 };
// message Sample: packed repeated uint64 ids, packed repeated int64 values, repeated Label
enum sample_field { SAMPLE_LOCATION_ID = 1, SAMPLE_VALUE = 2, SAMPLE_LABEL = 3 };
// message Label: key, str and num_unit are string indexes; num an int64
enum label_field { LABEL_KEY = 1, LABEL_STR = 2, LABEL_NUM = 3, LABEL_NUM_UNIT = 4 };
// message Location: uint64 id, repeated Line
enum location_field { LOCATION_ID = 1, LOCATION_LINE = 4 };
// message Line: uint64 function_id, int64 line
enum line_field { LINE_FUNCTION_ID = 1, LINE_LINE = 2 };
// message Function: uint64 id; the rest string indexes, but start_line an int64
enum function_field {
  FUNCTION_ID = 1,
  FUNCTION_NAME = 2,
  FUNCTION_SYSTEM_NAME = 3,
  FUNCTION_FILENAME = 4,
  FUNCTION_START_LINE = 5,
};

#endif
