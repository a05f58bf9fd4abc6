# frozen_string_literal: true

module Sonde
  # Wraps an instance method of a module without prepending to the module.
  #
  # A module prepended to Kernel puts it in Kernel's ancestors, and Ruby 3.3
  # then names every Kernel method as a singleton method in profiles
  # (`Kernel.is_a?` for `Kernel#is_a?`): the method is then reached through
  # the iclass of Kernel's origin, whose origin flag is the bit
  # rb_profile_frame_singleton_method_p reads as FL_SINGLETON. So the wrapper replaces the method in its
  # own module, keeps its visibility, and calls the original through its
  # UnboundMethod: Kernel's ancestors and method names stay as Ruby has them.
  module WrapInPlace
    module_function

    # Replaces owner's instance method name with one that calls around with
    # a lambda running the original (same receiver, arguments and block) and
    # the call's arguments; around's result is the call's.
    def wrap(owner, name, &around)
      original = owner.instance_method(name)
      visibility = visibility_of(owner, name)
      # An aliased method is replaced without Ruby's "method redefined" warning.
      owner.send(:alias_method, name, name)
      owner.send(:define_method, name) do |*arguments, &block|
        around.call(-> { original.bind_call(self, *arguments, &block) }, *arguments)
      end
      owner.send(:ruby2_keywords, name)
      owner.send(visibility, name)
    end

    def visibility_of(owner, name)
      if owner.private_method_defined?(name) then :private
      elsif owner.protected_method_defined?(name) then :protected
      else :public
      end
    end
  end
end
