def BadLike : Kernel<"bad_like", [Buf<"x">, Out<"out", "like:y">]>;
