# frozen_string_literal: true

# What Firefox Profiler's processed profile format, version 48, asks of a
# file, written from its own description (src/types/profile.js and
# docs-developer/CHANGELOG-formats.md of firefox-devtools/profiler at
# version 48), not from Sonde's writer: the fields of meta and of each
# thread, each table's columns (arrays as long as its length field), and
# every index in range. FirefoxFormat.problems(json) lists what is wrong,
# empty when nothing is.
module FirefoxFormat
  VERSION = 48
  META = %w[interval startTime processType product stackwalk version preprocessedProfileVersion markerSchema].freeze
  THREAD = %w[processType processStartupTime processShutdownTime registerTime unregisterTime pausedRanges name
              isMainThread pid tid samples markers stackTable frameTable funcTable resourceTable nativeSymbols
              stringArray].freeze
  # Required columns; samples may add threadCPUDelta, responsiveness,
  # eventDelay, threadId.
  TABLES = {
    "samples" => %w[stack time weight weightType],
    "stackTable" => %w[frame category subcategory prefix],
    "frameTable" => %w[address inlineDepth category subcategory func nativeSymbol innerWindowID implementation
                       line column],
    "funcTable" => %w[name isJS relevantForJS resource fileName lineNumber columnNumber],
    "markers" => %w[data name startTime endTime phase category],
    "resourceTable" => %w[lib name host type],
    "nativeSymbols" => %w[libIndex address name functionSize]
  }.freeze
  OPTIONAL_SAMPLE_COLUMNS = %w[threadCPUDelta responsiveness eventDelay threadId].freeze
  WEIGHT_TYPES = %w[samples tracing-ms bytes].freeze
  CPU_DELTA_UNITS = ["ns", "µs", "variable CPU cycles"].freeze

  module_function

  def problems(profile)
    found = []
    found << "not an object" unless profile.is_a?(Hash)
    return found unless found.empty?

    %w[meta libs threads].each { |key| found << "no #{key}" unless profile.key?(key) }
    meta = profile.fetch("meta", {})
    META.each { |key| found << "meta.#{key} missing" unless meta.key?(key) }
    found << "meta.preprocessedProfileVersion is #{meta["preprocessedProfileVersion"]}" unless
      meta["preprocessedProfileVersion"] == VERSION
    categories = meta.fetch("categories", [])
    found << "no grey category (the default one)" unless categories.any? { |c| c["color"] == "grey" }
    categories.each do |category|
      found << "category #{category["name"]}: subcategories do not start with Other" unless
        category["subcategories"]&.first == "Other"
    end
    units = meta["sampleUnits"]
    if units && !CPU_DELTA_UNITS.include?(units["threadCPUDelta"])
      found << "sampleUnits.threadCPUDelta #{units["threadCPUDelta"]}"
    end
    schemas = meta.fetch("markerSchema", []).map { |schema| schema["name"] }
    profile.fetch("threads", []).each_with_index do |thread, i|
      found.concat(thread_problems(thread, categories, schemas, units).map { |problem| "thread #{i}: #{problem}" })
    end
    found
  end

  def thread_problems(thread, categories, schemas, units)
    found = THREAD.reject { |key| thread.key?(key) }.map { |key| "#{key} missing" }
    return found unless found.empty?

    found << "pid is not a string" unless thread["pid"].is_a?(String)
    TABLES.each do |name, columns|
      optional = name == "samples" ? OPTIONAL_SAMPLE_COLUMNS : []
      found.concat(table_problems(thread[name], columns, optional).map { |problem| "#{name}: #{problem}" })
    end
    return found unless found.empty?

    strings = thread["stringArray"].size
    stacks, frames, funcs, samples, markers = thread.values_at("stackTable", "frameTable", "funcTable", "samples", "markers")
    in_range = lambda do |what, values, size, nullable: false|
      values.each_with_index do |value, row|
        next if value.nil? && nullable
        next if value.is_a?(Integer) && value >= 0 && value < size

        found << "#{what}[#{row}] = #{value.inspect} is not an index below #{size}"
      end
    end
    stacks["prefix"].each_with_index do |prefix, row|
      next if prefix.nil? || (prefix.is_a?(Integer) && prefix >= 0 && prefix < row)

      found << "stackTable.prefix[#{row}] = #{prefix.inspect}: not before its stack"
    end
    in_range.call("stackTable.frame", stacks["frame"], frames["length"])
    in_range.call("stackTable.category", stacks["category"], categories.size)
    in_range.call("frameTable.func", frames["func"], funcs["length"])
    in_range.call("frameTable.category", frames["category"], categories.size, nullable: true)
    in_range.call("funcTable.name", funcs["name"], strings)
    in_range.call("funcTable.fileName", funcs["fileName"], strings, nullable: true)
    in_range.call("samples.stack", samples["stack"], stacks["length"], nullable: true)
    in_range.call("markers.name", markers["name"], strings)
    in_range.call("markers.category", markers["category"], categories.size)
    [[stacks, "stackTable"], [frames, "frameTable"]].each do |table, name|
      table["subcategory"].each_with_index do |sub, row|
        category = categories[table["category"][row].to_i]
        next if sub.nil? || (category && sub.is_a?(Integer) && sub >= 0 && sub < category["subcategories"].size)

        found << "#{name}.subcategory[#{row}] = #{sub.inspect} not in its category"
      end
    end
    times = samples["time"]
    found << "samples.time not ascending" unless times.each_cons(2).all? { |a, b| a <= b }
    found << "samples.weightType #{samples["weightType"]}" unless WEIGHT_TYPES.include?(samples["weightType"])
    found << "samples.threadCPUDelta without meta.sampleUnits" if samples.key?("threadCPUDelta") && units.nil?
    markers["length"].times do |row|
      phase = markers["phase"][row]
      found << "markers.phase[#{row}] = #{phase.inspect}" unless [0, 1, 2, 3].include?(phase)
      start, stop = markers["startTime"][row], markers["endTime"][row]
      interval = start.is_a?(Numeric) && stop.is_a?(Numeric) && start <= stop
      found << "markers[#{row}] ends before it starts" if phase == 1 && !interval
      type = markers["data"][row]&.fetch("type", nil)
      found << "markers.data[#{row}].type #{type.inspect} has no schema" if type && !schemas.include?(type)
    end
    found
  end

  def table_problems(table, required, optional)
    return ["not an object"] unless table.is_a?(Hash)

    length = table["length"]
    return ["length #{length.inspect}"] unless length.is_a?(Integer) && length >= 0

    found = required.reject { |column| table.key?(column) }.map { |column| "no #{column} column" }
    (required + optional).each do |column|
      values = table[column]
      next if values.nil? && !required.include?(column)
      next if column == "weightType" || (column == "weight" && values.nil?)

      found << "#{column} is not an array of #{length}" unless values.is_a?(Array) && values.size == length
    end
    found
  end
end
