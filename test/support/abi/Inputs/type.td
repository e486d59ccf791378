def BadType : Kernel<"bad_type", [Buf<"x">], [Param<"n", "i8", "">]>;
