//===- PrefixCache.h - Radix tree of cached KV pages ------------*- C++ -*-===//
//
// Exact token ids at page granularity: each node is one full page (pageRows
// token ids) and the pool page holding every cache's rows for it (latent,
// indexer keys and the MTP layer's caches together), its parent the page
// before it. A node's KV depends only on the tokens from the root to it, so
// any sequence whose prompt starts with those tokens may share the page.
//
// match() returns the longest cached prefix; insert() adds a sequence's full
// pages as they are written; evict() hands back unreferenced leaves, least
// recently used first, until enough pages are free; flush() drops all.
// Pages are reference-counted by the KvPool, not here.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_SERVE_PREFIXCACHE_H
#define KILN_RUNTIME_SERVE_PREFIXCACHE_H

#include "runtime/serve/KvPool.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kiln::serve {

class PrefixCache {
public:
  explicit PrefixCache(KvPool &pool);
  ~PrefixCache();
  PrefixCache(const PrefixCache &) = delete;
  PrefixCache &operator=(const PrefixCache &) = delete;

  /// The pages of the longest cached prefix of tokens[0, count), whole pages
  /// only; marks them recently used. The caller retains what it keeps.
  std::vector<int32_t> match(const int32_t *tokens, int64_t count);

  /// Caches pages[i] as the page of tokens[i*P, (i+1)*P) for i < pages.size()
  /// (all full). A page whose tokens are cached already under another page
  /// id stays the caller's own; later pages still chain under the cached one.
  void insert(const int32_t *tokens, const std::vector<int32_t> &pages);

  /// Drops unreferenced leaves, least recently used first, until the pool
  /// has `wantFree` free pages or nothing more can go. Returns pages freed.
  int64_t evict(int64_t wantFree);

  /// Forgets every node (referenced pages stay with their sequences).
  void flush();

  int64_t nodes() const { return nodes_; }
  /// "" when every node's page is cached in the pool exactly once and every
  /// cached page is a node, else what is wrong.
  std::string checkInvariants() const;

private:
  struct Node;
  KvPool &pool_;
  std::unique_ptr<Node> root_;
  int64_t nodes_ = 0;
  uint64_t clock_ = 0;
};

} // namespace kiln::serve

#endif // KILN_RUNTIME_SERVE_PREFIXCACHE_H
