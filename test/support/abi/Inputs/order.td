def BadOrder : Kernel<"bad_order", [Out<"out">, Buf<"x">]> {
  let op = "kiln.bad_order";
}
