//===- Kernels.td - The kernel contract, declared once ----*- tablegen -*-===//
//
// Every kernel a plan can dispatch: its arguments in order (what each may
// refer to, its element type, whether it is optional, written, variadic)
// and its typed parameters. support/abi/gen_kernel_abi.py reads this file
// (through `llvm-tblgen --dump-json`) and generates, at build time:
//
//   support/abi/KernelContract.h   the Kernel enum, the names, the argument
//                                  and parameter tables, one plain struct per
//                                  kernel's parameters (both sides use it);
//   runtime/artifact/KernelParams.fbs   one FlatBuffers table per kernel's
//                                  parameters and the union `KernelParams`
//                                  that Dispatch.params holds;
//   runtime/artifact/KernelParamsFb.h   the structs to and from that union.
//
// The structural checks both sides run on a dispatch (argument count, kinds,
// None only where optional, buffer element types, outputs that must not
// alias inputs) read the generated tables (support/abi/Signature.h); the
// rules that relate one argument's shape to another's stay in C++
// (runtime/engine/PlanValidator.cpp).
//
// Kernels are numbered in the order they appear here, and that number is
// the union tag in the artifact: append new kernels at the end (any other
// change bumps FORMAT_VERSION in runtime/artifact/ArtifactFormat.h).
//
//===----------------------------------------------------------------------===//

// --- Arguments ---------------------------------------------------------------

// `kinds`: what the argument may refer to, any of "B" (an activation buffer),
// "W" (a weight) and "C" (a cache). `dtype`: for buffers, "f32", "i32", "any"
// or "like:NAME" (the element type of argument NAME).
class Arg<string n, string k, string t> {
  string name = n;
  string kinds = k;
  string dtype = t;
  bit optional = 0; // may be None
  bit output = 0;   // written by the kernel
  bit variadic = 0; // one or more arguments
  bit panels = 0;   // a weight also read in the CPU row-panel layout
}
class Buf<string n, string t = "f32"> : Arg<n, "B", t>;
class OptBuf<string n, string t = "f32"> : Arg<n, "B", t> { let optional = 1; }
class Out<string n, string t = "f32"> : Arg<n, "B", t> { let output = 1; }
class Weight<string n> : Arg<n, "W", "any">;
class OptWeight<string n> : Arg<n, "W", "any"> { let optional = 1; }
// A matrix the kernel reads as the right operand of a matmul, row by row
// from any layout the CPU matmul reads, the row panels (DensePanel4)
// included: the compiler stores a Dense weight in panels when every
// argument it is bound to says so.
class MatWeight<string n> : Weight<n> { let panels = 1; }
class OptMatWeight<string n> : OptWeight<n> { let panels = 1; }
class Cache<string n> : Arg<n, "C", "any">;
// A buffer or a vector weight (broadcast along the rows).
class BufOrWeight<string n> : Arg<n, "BW", "f32">;
class Bufs<string n, string t> : Arg<n, "B", t> { let variadic = 1; }
class Outs<string n, string t> : Arg<n, "B", t> {
  let output = 1;
  let variadic = 1;
}

// --- Parameters --------------------------------------------------------------

class Param<string n, string t, string d> {
  string name = n;
  string type = t; // "i64", "f32" or "bool"
  string doc = d;
}
class I64<string n, string d = ""> : Param<n, "i64", d>;
class F32<string n, string d = ""> : Param<n, "f32", d>;
class Bool<string n, string d = ""> : Param<n, "bool", d>;

// --- Row rules ---------------------------------------------------------------

// Rules between two buffer arguments (skipped where either is not a buffer,
// applied to each argument a variadic one stands for): the same kind of rows
// (Tokens, Selected, One), the same number of values per row, or one value
// per row.
class RowRule<string k, string a, string b> {
  string kind = k;
  string lhs = a;
  string rhs = b;
}
class SameRows<string a, string b> : RowRule<"same_rows", a, b>;
class SameWidth<string a, string b> : RowRule<"same_width", a, b>;
class OnePerRow<string a> : RowRule<"one_per_row", a, a>;
// Both of the above: `b` is a row-for-row image of `a`.
class Like<string a, string b> : RowRule<"like", a, b>;
// `a` has this rank's Tokens rows and `b` the Gathered rows of every
// data-parallel rank, with the same number of values per row.
class Gathers<string a, string b> : RowRule<"gathers", a, b>;
// `a` has this rank's Tokens rows and `b` the Routed rows this rank received
// in the last dispatch_rows, with the same number of values per row.
class Routes<string a, string b> : RowRule<"routes", a, b>;

// --- Kernels -----------------------------------------------------------------

// `inPlace`: 0 when no output may share a buffer with an input.
// `op`: a kiln dialect op the plan builder lowers to this kernel by itself:
// operands in order as the inputs, results in order as the outputs, each
// parameter from the op's attribute of the same name. Empty when
// kiln-build-plan (passes/BuildPlan.cpp) lowers the kernel by hand.
class Kernel<string n, list<Arg> a, list<Param> p = []> {
  string name = n;
  list<Arg> args = a;
  list<Param> params = p;
  list<RowRule> rows = [];
  bit inPlace = 1;
  string op = "";
  string summary = "";
}

def Embedding : Kernel<"embedding",
    [Buf<"ids", "i32">, Weight<"table">, Out<"out">]> {
  let rows = [OnePerRow<"ids">, SameRows<"ids", "out">];
  let summary = "out[t] = table[ids[t]]";
}
def RmsNorm : Kernel<"rms_norm", [Buf<"x">, Weight<"weight">, Out<"out">],
    [F32<"eps">]> {
  let rows = [Like<"x", "out">];
  let summary = "RMS norm over each group of len(weight) values";
}
def LayerNorm : Kernel<"layer_norm",
    [Buf<"x">, Weight<"weight">, Weight<"bias">, Out<"out">], [F32<"eps">]> {
  let rows = [Like<"x", "out">];
}
def Matmul : Kernel<"matmul", [Buf<"x">, MatWeight<"weight">, Out<"out">]> {
  let rows = [SameRows<"x", "out">];
  let summary = "out = x weight^T, the weight in any stored layout";
  let inPlace = 0;
}
def Rope : Kernel<"rope", [Buf<"x">, Buf<"positions", "i32">, Out<"out">],
    [I64<"style", "0 interleaved, 1 neox">,
     I64<"offset", "first rotated dim of each head">,
     I64<"rotary_dim">, I64<"heads">, F32<"theta">]> {
  let rows = [OnePerRow<"positions">, SameRows<"x", "positions">,
              Like<"x", "out">];
}
class Elementwise<string n, list<Param> p = []>
    : Kernel<n, [Buf<"x">, Out<"out">], p> {
  let rows = [Like<"x", "out">];
  let op = "kiln." # n;
}
def Sigmoid : Elementwise<"sigmoid">;
def Silu : Elementwise<"silu">;
def Relu : Elementwise<"relu">;
def Add : Kernel<"add", [BufOrWeight<"lhs">, BufOrWeight<"rhs">, Out<"out">]> {
  let summary = "one operand may be one row or a vector weight (broadcast)";
}
def Mul : Kernel<"mul", [BufOrWeight<"lhs">, BufOrWeight<"rhs">, Out<"out">]>;
def Scale : Kernel<"scale", [Buf<"x">, Out<"out">], [F32<"factor">]> {
  let rows = [Like<"x", "out">];
}
def Softmax : Elementwise<"softmax">;
def Normalize : Kernel<"normalize", [Buf<"x">, Out<"out">], [F32<"eps">]> {
  let rows = [Like<"x", "out">];
}
def TopK : Kernel<"top_k",
    [Buf<"x">, Out<"values">, Out<"indices", "i32">], [I64<"k">]> {
  let rows = [SameRows<"x", "values">, Like<"values", "indices">];
  let inPlace = 0;
}
def GroupLimit : Kernel<"group_limit", [Buf<"x">, Out<"out">],
    [I64<"n_group">, I64<"topk_group">]> {
  let rows = [Like<"x", "out">];
}
def Gather : Kernel<"gather",
    [Buf<"x">, Buf<"indices", "i32">, Out<"out">]> {
  let rows = [SameRows<"x", "indices">, Like<"indices", "out">];
  let inPlace = 0;
}
def Argmax : Kernel<"argmax", [Buf<"x">, Out<"out", "i32">]> {
  let rows = [SameRows<"x", "out">];
}
def Split : Kernel<"split", [Buf<"x", "any">, Outs<"out", "like:x">],
    [I64<"axis", "counting the rows as axis 0">,
     I64<"outer", "blocks per row: the product of the dims before the axis">]> {
  let rows = [SameRows<"x", "out">];
  let inPlace = 0;
}
def Concat : Kernel<"concat", [Bufs<"in", "like:out">, Out<"out", "any">],
    [I64<"axis", "counting the rows as axis 0">,
     I64<"outer", "blocks per row: the product of the dims before the axis">]> {
  let rows = [SameRows<"out", "in">];
  let inPlace = 0;
}
def TakeRows : Kernel<"take_rows",
    [Buf<"x", "any">, Buf<"rows", "i32">, Out<"out", "like:x">]> {
  let rows = [OnePerRow<"rows">, SameWidth<"x", "out">, SameRows<"rows", "out">];
  let inPlace = 0;
}
def KvAppend : Kernel<"kv_append",
    [Cache<"cache">, Buf<"seq", "i32">, Buf<"pos", "i32">, Buf<"values">]> {
  let rows = [OnePerRow<"seq">, OnePerRow<"pos">, SameRows<"values", "seq">,
              SameRows<"values", "pos">];
}
def MlaAttention : Kernel<"mla_attention",
    [Buf<"q_nope">, Buf<"q_pe">, Weight<"kv_b">, Cache<"latent">,
     Buf<"seq", "i32">, Buf<"pos", "i32">, OptBuf<"top_k", "i32">, Out<"out">],
    [I64<"heads">, F32<"scale">]> {
  let rows = [SameRows<"q_nope", "q_pe">, OnePerRow<"seq">, OnePerRow<"pos">,
              SameRows<"q_nope", "seq">, SameRows<"q_nope", "pos">,
              SameRows<"q_nope", "top_k">, SameRows<"q_nope", "out">];
  let inPlace = 0;
}
def IndexerTopK : Kernel<"indexer_top_k",
    [Buf<"q">, Buf<"weights">, Cache<"keys">, Buf<"seq", "i32">,
     Buf<"pos", "i32">, Out<"out", "i32">],
    [I64<"k">, I64<"heads">, F32<"scale">]> {
  let rows = [SameRows<"q", "weights">, OnePerRow<"seq">, OnePerRow<"pos">,
              SameRows<"q", "seq">, SameRows<"q", "pos">, SameRows<"q", "out">];
}
def GqaAttention : Kernel<"gqa_attention",
    [Buf<"q">, Cache<"k">, Cache<"v">, Buf<"seq", "i32">, Buf<"pos", "i32">,
     Out<"out">],
    [I64<"q_heads">, F32<"scale">]> {
  let rows = [OnePerRow<"seq">, OnePerRow<"pos">, SameRows<"q", "seq">,
              SameRows<"q", "pos">, SameRows<"q", "out">];
  let inPlace = 0;
}
def Moe : Kernel<"moe",
    [Buf<"x">, Weight<"router">, Weight<"bias">, MatWeight<"gate">,
     MatWeight<"up">, MatWeight<"down">, OptMatWeight<"shared_gate">,
     OptMatWeight<"shared_up">, OptMatWeight<"shared_down">, Out<"out">],
    [I64<"top_k">, I64<"n_group">, I64<"topk_group">, Bool<"norm_topk_prob">,
     I64<"block_size", "rows per expert block of the routed GEMMs">,
     F32<"scale", "routed_scaling_factor">,
     I64<"expert_offset", "the stacks hold experts expert_offset, ...: one "
                          "rank's share under expert parallelism">,
     Bool<"shared_own_rows", "the shared expert runs on the call's own "
                             "tokens only, the first rows of x (after "
                             "dispatch_rows); otherwise on every row">]> {
  let rows = [Like<"x", "out">];
  let inPlace = 0;
  let summary = "routed experts (support/abi/MoeRules.h) plus the optional "
                "shared expert";
}
def AllReduce : Kernel<"all_reduce", [Buf<"x">, Out<"out">],
    [I64<"group", "sum over groups of this many consecutive ranks (0: all "
                  "ranks)">]> {
  let rows = [Like<"x", "out">];
  let op = "kiln.all_reduce";
  let summary = "out = the sum of x over the rank's group, added in rank "
                "order (runtime/comm); a copy on one rank";
}
def AllGatherRows : Kernel<"all_gather_rows", [Buf<"x">, Out<"out">],
    [I64<"group", "ranks per data-parallel group, which hold the same rows "
                  "(the tensor-parallel ranks of one group; 1: each rank "
                  "its own)">]> {
  let rows = [Gathers<"x", "out">];
  let inPlace = 0;
  let op = "kiln.all_gather_rows";
  let summary = "out = the rows of x of every data-parallel group, in "
                "group order (runtime/comm); a copy on one rank";
}
def ReduceScatterRows : Kernel<"reduce_scatter_rows", [Buf<"x">, Out<"out">],
    [I64<"group", "ranks per data-parallel group, as all_gather_rows">]> {
  let rows = [Gathers<"out", "x">];
  let inPlace = 0;
  let op = "kiln.reduce_scatter_rows";
  let summary = "out = this rank's group's rows of the sum of x over every "
                "rank, added in rank order (runtime/comm); a copy on one rank";
}
def DispatchRows : Kernel<"dispatch_rows",
    [Buf<"x">, Weight<"router">, Weight<"bias">, Out<"out">,
     Out<"routes", "i32">],
    [I64<"top_k">, I64<"n_group">, I64<"topk_group">,
     I64<"experts_per_rank", "routed experts each rank holds, rank r "
                             "experts r * experts_per_rank, ...">,
     Bool<"own_rows", "this rank receives all its own rows (first), "
                      "whatever their experts: it runs their shared expert">]> {
  let rows = [Routes<"x", "out">, SameRows<"x", "routes">];
  let inPlace = 0;
  let summary = "each row of x routed (support/abi/MoeRules.h) and sent to "
                "every rank that holds one of its experts (runtime/comm "
                "all-to-all); out = the rows this rank received, its own "
                "first, then each peer's in rank order; routes = per row, "
                "the ranks it went to (a bit per rank)";
}
def CombineRows : Kernel<"combine_rows",
    [Buf<"x">, Buf<"routes", "i32">, Out<"out">]> {
  let rows = [Routes<"out", "x">, SameRows<"routes", "out">];
  let inPlace = 0;
  let summary = "the way back from dispatch_rows: each received row of x "
                "goes back to the rank it came from, which adds its rows' "
                "parts in rank order";
}
