def BadRule : Kernel<"bad_rule", [Buf<"x">, Out<"out">]> {
  let rows = [SameRows<"x", "y">];
}
