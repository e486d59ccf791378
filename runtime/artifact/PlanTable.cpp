//===- PlanTable.cpp - Plans and caches into the artifact -----------------===//

#include "runtime/artifact/PlanTable.h"

#include "runtime/artifact/KernelParamsFb.h"

using namespace kiln;

flatbuffers::Offset<fb::Plan>
artifact::writePlan(flatbuffers::FlatBufferBuilder &fbb,
                    const abi::PlanSpec &plan,
                    const std::vector<uint32_t> &kernelOf) {
  std::vector<flatbuffers::Offset<fb::Buffer>> buffers;
  for (const abi::BufferSpec &b : plan.buffers) {
    auto name = fbb.CreateString(b.name);
    auto shape = fbb.CreateVector(b.rowShape);
    fb::BufferBuilder bb(fbb);
    bb.add_name(name);
    bb.add_dtype(b.i32 ? fb::DType::I32 : fb::DType::F32);
    bb.add_rows(static_cast<fb::Rows>(b.rows));
    bb.add_row_shape(shape);
    buffers.push_back(bb.Finish());
  }
  std::vector<flatbuffers::Offset<fb::Dispatch>> dispatches;
  for (size_t i = 0; i < plan.dispatches.size(); ++i) {
    const abi::DispatchSpec &d = plan.dispatches[i];
    std::vector<fb::Arg> args;
    for (const abi::ArgRef &a : d.args)
      args.emplace_back(static_cast<fb::ArgKind>(a.kind), a.index);
    auto argsVec = fbb.CreateVectorOfStructs(args);
    auto [paramsType, params] = abi::writeParams(fbb, d.params);
    auto loc = fbb.CreateString(d.location);
    fb::DispatchBuilder db(fbb);
    db.add_kernel(kernelOf.at(i));
    db.add_args(argsVec);
    db.add_params_type(paramsType);
    if (!params.IsNull())
      db.add_params(params);
    db.add_location(loc);
    dispatches.push_back(db.Finish());
  }
  auto name = fbb.CreateString(plan.name);
  auto bufVec = fbb.CreateVector(buffers);
  auto inputs = fbb.CreateVector(plan.inputs);
  auto outputs = fbb.CreateVector(plan.outputs);
  auto dispVec = fbb.CreateVector(dispatches);
  fb::PlanBuilder pb(fbb);
  pb.add_name(name);
  pb.add_buffers(bufVec);
  pb.add_inputs(inputs);
  pb.add_outputs(outputs);
  pb.add_dispatches(dispVec);
  return pb.Finish();
}

flatbuffers::Offset<fb::Cache>
artifact::writeCache(flatbuffers::FlatBufferBuilder &fbb,
                     const abi::CacheSpec &cache) {
  auto name = fbb.CreateString(cache.name);
  auto owner = fbb.CreateString(cache.owner);
  fb::CacheBuilder cb(fbb);
  cb.add_name(name);
  cb.add_width(cache.width);
  cb.add_dtype(cache.bf16 ? fb::DType::BF16 : fb::DType::F32);
  cb.add_plan(owner);
  return cb.Finish();
}
