def Matmul2 : Kernel<"matmul", [Buf<"x">, Out<"out">]>;
