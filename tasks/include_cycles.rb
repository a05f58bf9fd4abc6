# frozen_string_literal: true

# The include graph of the native core, by module: a module is a file's name
# without .c or .h (scheduler.c and scheduler.h are one module), and module A
# depends on B when A.c or A.h includes "B.h". The core is meant to read one
# way: a cycle means two modules that cannot be understood, tested or changed
# apart. `rake test:includes` (run first by `rake test:c`) fails on any cycle
# not listed in ALLOWED, naming it.
module IncludeCycles
  # Files that implement another module's interface belong to it: the VM
  # backends are two implementations of vm.h, one compiled (extconf.rb).
  MODULE_OF_FILE = { "vm_public" => "vm", "vm_ruby31" => "vm" }.freeze

  # Cycles known and not broken yet, each as [module, module] with a
  # comment saying where its fix is tracked. None now: the last one,
  # scheduler <-> sampling_pass, went when profiler.c began handing the
  # scheduler the pass its idle helper runs (scheduler_pass_fn).
  ALLOWED = [].freeze

  INCLUDE = /^\s*#\s*include\s+"([^"]+)\.h"/

  module_function

  # { module => sorted modules it includes } for the .c and .h files in dir.
  def graph(dir)
    edges = Hash.new { |hash, key| hash[key] = [] }
    Dir[File.join(dir, "*.{c,h}")].sort.each do |path|
      from = module_of(File.basename(path).sub(/\.[ch]\z/, ""))
      edges[from] # every module is a node, even one that includes nothing
      File.foreach(path) do |line|
        included = line[INCLUDE, 1] or next
        to = module_of(included)
        edges[from] << to unless to == from
      end
    end
    edges.transform_values { |targets| targets.uniq.sort }
  end

  def module_of(name)
    MODULE_OF_FILE.fetch(name, name)
  end

  # The strongly connected components of more than one module (Tarjan's
  # algorithm), each sorted, in sorted order: every module of one can reach
  # every other, so each is one cycle or several that share modules.
  def cycles(graph)
    state = { index: 0, indexes: {}, lowlinks: {}, stack: [], on_stack: {}, components: [] }
    graph.each_key { |node| connect(node, graph, state) unless state[:indexes].key?(node) }
    state[:components].select { |component| component.size > 1 }.map(&:sort).sort
  end

  def connect(node, graph, state)
    state[:indexes][node] = state[:lowlinks][node] = state[:index]
    state[:index] += 1
    state[:stack].push(node)
    state[:on_stack][node] = true
    graph.fetch(node, []).each do |target|
      if !state[:indexes].key?(target)
        connect(target, graph, state)
        state[:lowlinks][node] = [state[:lowlinks][node], state[:lowlinks][target]].min
      elsif state[:on_stack][target]
        state[:lowlinks][node] = [state[:lowlinks][node], state[:indexes][target]].min
      end
    end
    return unless state[:lowlinks][node] == state[:indexes][node]

    component = []
    loop do
      member = state[:stack].pop
      state[:on_stack][member] = false
      component << member
      break if member == node
    end
    state[:components] << component
  end

  # The shortest path around a component through its first module, for the
  # message: a -> b -> ... -> a (breadth first, inside the component).
  def path_around(component, graph)
    start = component.first
    came_from = {}
    queue = [start]
    until queue.empty?
      node = queue.shift
      graph.fetch(node, []).each do |target|
        next unless component.include?(target)
        return (trail(came_from, node, start) << start).join(" -> ") if target == start
        next if came_from.key?(target) || target == start

        came_from[target] = node
        queue << target
      end
    end
    component.join(" <-> ")
  end

  def trail(came_from, node, start)
    path = [node]
    path.unshift(came_from.fetch(path.first)) until path.first == start
    path
  end

  # [new cycles, allowed cycles no longer there] for the core in dir.
  def check(dir, allowed = ALLOWED)
    graph = graph(dir)
    found = cycles(graph)
    allowed_sorted = allowed.map(&:sort)
    new_cycles = (found - allowed_sorted).map { |component| path_around(component, graph) }
    [new_cycles, allowed_sorted - found]
  end
end
