//===- HipPlanCaches.cpp - HipPlanDevice's caches, slots and page pool ---===//
//
// The half of HipPlanDevice (HipPlanDevice.h) that keeps the KV caches:
// sequence slots, the page table the cache kernels read, the serving
// engine's page pool (usePool, setPageTable), lengths, rollback, and the
// checks of a plan call's inputs against them.
//
//===----------------------------------------------------------------------===//

#include "runtime/hip/HipPlanDevice.h"

#include <algorithm>

using namespace kiln;
using namespace kiln::hip;
using engine::PlanInputs;
using engine::ValidatedPlan;

Status HipPlanDevice::allocateCaches(int64_t pages) {
  const fb::Artifact &meta = *model_.artifact().meta();
  for (void *p : caches_)
    KILN_RETURN_IF_ERROR(release(p));
  caches_.clear();
  KILN_RETURN_IF_ERROR(release(deviceTable_));
  deviceTable_ = nullptr;
  if (const auto *caches = meta.caches())
    for (const fb::Cache *c : *caches) {
      size_t elem = c->dtype() == fb::DType::BF16 ? 2 : 4;
      __int128 bytes = __int128(pages) * pageRows_ * c->width() * elem;
      if (bytes > (__int128(1) << 46))
        return makeError(StatusCode::ResourceExhausted, "HIP device: cache '",
                         c->name()->str(), "' of ", pages, " pages of ",
                         pageRows_, " rows would need more than 64 TiB");
      KILN_ASSIGN_OR_RETURN(void *p, allocate(size_t(bytes)));
      caches_.push_back(p);
    }
  pages_ = pages;
  table_.assign(size_t(slots_ * (capacity_ / pageRows_)), 0);
  tablePages_.assign(size_t(slots_), 0);
  KILN_ASSIGN_OR_RETURN(deviceTable_, allocate(table_.size() * 4));
  tableChanged_ = true;
  return Status::ok();
}

Status HipPlanDevice::usePool(int64_t pages, int64_t pageRows) {
  for (const auto &l : lengths_)
    for (size_t slot = 0; slot < l.size(); ++slot)
      if (l[slot] > 0)
        return makeError(StatusCode::FailedPrecondition, name(),
                         ": usePool: sequence ", slotSeq_[slot],
                         " already holds rows");
  if (pages < 1 || pageRows < 1 || pageRows > (1 << 16) ||
      pages > (int64_t(1) << 31) / pageRows)
    return makeError(StatusCode::InvalidArgument, name(), ": a pool of ", pages,
                     " pages of ", pageRows,
                     " rows, expected pages x rows below 2^31");
  pageRows_ = pageRows;
  capacity_ = (capacity_ + pageRows_ - 1) / pageRows_ * pageRows_;
  pooled_ = true;
  return allocateCaches(pages);
}

Status HipPlanDevice::setPageTable(int32_t seq, const int32_t *pages,
                                   int64_t count, int64_t mainRows,
                                   int64_t draftRows) {
  if (!pooled_)
    return makeError(StatusCode::FailedPrecondition, name(),
                     ": setPageTable before usePool");
  int64_t perSlot = capacity_ / pageRows_;
  if (count < 0 || count > perSlot)
    return makeError(StatusCode::ResourceExhausted, name(), ": sequence ", seq,
                     " needs ", count, " pages of ", pageRows_,
                     " rows, and the device's page table holds ", perSlot, " (",
                     capacity_, " positions per sequence)");
  for (int64_t i = 0; i < count; ++i)
    if (pages[i] < 0 || pages[i] >= pages_)
      return makeError(StatusCode::InvalidArgument, name(), ": sequence ", seq,
                       " page ", i, " is ", pages[i], ", expected 0 to ",
                       pages_ - 1);
  if (mainRows < 0 || draftRows < 0 || mainRows > count * pageRows_ ||
      draftRows > count * pageRows_)
    return makeError(StatusCode::InvalidArgument, name(), ": sequence ", seq,
                     " holds ", mainRows, " main and ", draftRows,
                     " draft rows in ", count, " pages of ", pageRows_);
  Result<int32_t> found = slotOf(seq, false);
  if (!found.isOk() && count == 0 && mainRows == 0 && draftRows == 0)
    return Status::ok();
  KILN_ASSIGN_OR_RETURN(int32_t slot, slotOf(seq, true));
  tablePages_[size_t(slot)] = count;
  int32_t *row = table_.data() + size_t(slot) * size_t(perSlot);
  for (int64_t i = 0; i < perSlot; ++i) {
    int32_t page = i < count ? pages[i] : 0; // 0: never read
    tableChanged_ = tableChanged_ || row[i] != page;
    row[i] = page;
  }
  for (size_t c = 0; c < lengths_.size(); ++c)
    lengths_[c][size_t(slot)] =
        model_.cacheOwner(c) == engine::kDraftCaches ? draftRows : mainRows;
  return Status::ok();
}

int64_t HipPlanDevice::freeMemory() const { return device_->freeMemory(); }

Result<int32_t> HipPlanDevice::slotOf(int32_t seq, bool create) const {
  for (size_t s = 0; s < slotSeq_.size(); ++s)
    if (slotSeq_[s] == seq)
      return int32_t(s);
  if (create)
    for (size_t s = 0; s < slotSeq_.size(); ++s)
      if (slotSeq_[s] < 0) {
        slotSeq_[s] = seq;
        return int32_t(s);
      }
  return makeError(StatusCode::ResourceExhausted, "HIP device: sequence ", seq,
                   " needs a cache slot, and all ", slots_, " are in use");
}

int64_t HipPlanDevice::cacheRows(size_t cache, int32_t seq) const {
  Result<int32_t> slot = slotOf(seq, false);
  if (!slot.isOk() || cache >= lengths_.size())
    return 0;
  return lengths_[cache][size_t(slot.value())];
}

void HipPlanDevice::truncate(size_t cache, int32_t seq, int64_t length) {
  Result<int32_t> slot = slotOf(seq, false);
  if (!slot.isOk() || cache >= lengths_.size())
    return;
  int64_t &rows = lengths_[cache][size_t(slot.value())];
  rows = std::min(rows, std::max<int64_t>(length, 0));
  // A sequence whose caches are all empty gives its slot back.
  bool empty = true;
  for (const auto &l : lengths_)
    empty = empty && l[size_t(slot.value())] == 0;
  if (empty && length == 0)
    slotSeq_[size_t(slot.value())] = -1;
}

Status HipPlanDevice::checkInputs(const ValidatedPlan &plan,
                                  const PlanInputs &in,
                                  std::vector<int32_t> &slots) const {
  KILN_RETURN_IF_ERROR(plan.checkInputs(
      in, capacity_,
      [&](uint32_t cache, int32_t seq) { return cacheRows(cache, seq); },
      " on " + name(),
      " (the device caches hold " + std::to_string(capacity_) +
          " positions per sequence)"));
  slots.resize(size_t(in.tokens));
  int64_t perSlot = capacity_ / pageRows_;
  for (int64_t t = 0; t < in.tokens; ++t) {
    Result<int32_t> slot = slotOf(in.seqIds[t], !pooled_);
    if (!slot.isOk() && pooled_)
      return makeError(StatusCode::FailedPrecondition, "plan '", plan.name(),
                       "' on ", name(), ": sequence ", in.seqIds[t],
                       " has no page table in the pool (setPageTable)");
    KILN_ASSIGN_OR_RETURN(slots[t], std::move(slot));
    // In the pool a sequence's rows are the pages its table names.
    int64_t held = pooled_ ? tablePages_[size_t(slots[t])] : perSlot;
    if (in.positions[t] >= held * pageRows_)
      return makeError(StatusCode::InvalidArgument, "plan '", plan.name(),
                       "' on ", name(), ": positions[", t,
                       "] = ", in.positions[t], " of sequence ", in.seqIds[t],
                       " is past the ", held, " page(s) of ", pageRows_,
                       " rows its page table holds");
  }
  return Status::ok();
}
