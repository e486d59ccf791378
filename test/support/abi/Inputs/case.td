def BadCase : Kernel<"BadCase", [Buf<"x">, Out<"out">]>;
