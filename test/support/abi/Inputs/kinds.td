def BadKinds : Kernel<"bad_kinds", [Arg<"x", "Q", "f32">]>;
