# frozen_string_literal: true

# Builds the loader: a tiny extension whose only job is to dlopen the native
# core with RTLD_DEEPBIND and check it before calling its init.
require "mkmf"
require_relative "../../lib/sonde/platform"

$CFLAGS << " -std=gnu11 -fvisibility=hidden -Werror-implicit-function-declaration -Wall -Wextra -Wno-unused-parameter"
have_library("dl")
name = Sonde::Platform.loader_extension_name
# The init function's name must follow the file name; the C file takes it from here.
$defs << "-DSONDE_LOADER_INIT=Init_#{name}"
create_makefile("sonde/native/#{name}")
