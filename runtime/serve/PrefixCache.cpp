//===- PrefixCache.cpp ----------------------------------------------------===//

#include "runtime/serve/PrefixCache.h"

#include <algorithm>
#include <functional>
#include <queue>

using namespace kiln::serve;

struct PrefixCache::Node {
  std::vector<int32_t> tokens; // pageRows ids; empty at the root
  int32_t page = -1;
  uint64_t lastUse = 0;
  Node *parent = nullptr;
  std::map<std::vector<int32_t>, std::unique_ptr<Node>> children;
};

PrefixCache::PrefixCache(KvPool &pool)
    : pool_(pool), root_(std::make_unique<Node>()) {}

PrefixCache::~PrefixCache() = default;

std::vector<int32_t> PrefixCache::match(const int32_t *tokens, int64_t count) {
  std::vector<int32_t> pages;
  const int64_t P = pool_.pageRows();
  Node *node = root_.get();
  std::vector<int32_t> key;
  for (int64_t begin = 0; begin + P <= count; begin += P) {
    key.assign(tokens + begin, tokens + begin + P);
    auto it = node->children.find(key);
    if (it == node->children.end())
      break;
    node = it->second.get();
    node->lastUse = ++clock_;
    pages.push_back(node->page);
  }
  return pages;
}

void PrefixCache::insert(const int32_t *tokens,
                         const std::vector<int32_t> &pages) {
  const int64_t P = pool_.pageRows();
  Node *node = root_.get();
  for (size_t i = 0; i < pages.size(); ++i) {
    std::vector<int32_t> key(tokens + int64_t(i) * P,
                             tokens + int64_t(i + 1) * P);
    auto it = node->children.find(key);
    if (it == node->children.end()) {
      auto child = std::make_unique<Node>();
      child->tokens = key;
      child->page = pages[i];
      child->parent = node;
      pool_.setCached(pages[i], true);
      ++nodes_;
      it = node->children.emplace(std::move(key), std::move(child)).first;
    }
    node = it->second.get();
    node->lastUse = ++clock_;
  }
}

int64_t PrefixCache::evict(int64_t wantFree) {
  using Entry = std::pair<uint64_t, Node *>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> leaves;
  auto evictable = [&](Node *n) {
    return n != root_.get() && n->children.empty() && pool_.refs(n->page) == 0;
  };
  std::function<void(Node *)> collect = [&](Node *n) {
    for (auto &kv : n->children)
      collect(kv.second.get());
    if (evictable(n))
      leaves.push({n->lastUse, n});
  };
  if (pool_.freePages() >= wantFree)
    return 0;
  collect(root_.get());
  int64_t freed = 0;
  while (pool_.freePages() < wantFree && !leaves.empty()) {
    Node *n = leaves.top().second;
    leaves.pop();
    Node *parent = n->parent;
    pool_.setCached(n->page, false);
    --nodes_;
    ++freed;
    parent->children.erase(n->tokens); // destroys n
    if (evictable(parent))
      leaves.push({parent->lastUse, parent});
  }
  return freed;
}

void PrefixCache::flush() {
  std::function<void(Node *)> drop = [&](Node *n) {
    for (auto &kv : n->children) {
      drop(kv.second.get());
      pool_.setCached(kv.second->page, false);
    }
    n->children.clear();
  };
  drop(root_.get());
  nodes_ = 0;
}

std::string PrefixCache::checkInvariants() const {
  std::vector<uint8_t> seen(size_t(pool_.pages()), 0);
  int64_t count = 0;
  std::string error;
  std::function<void(const Node *)> walk = [&](const Node *n) {
    for (const auto &kv : n->children) {
      const Node *c = kv.second.get();
      ++count;
      if (c->page < 0 || c->page >= pool_.pages()) {
        error = "node holds page id " + std::to_string(c->page);
        return;
      }
      if (seen[size_t(c->page)]++)
        error = "page " + std::to_string(c->page) + " is in two nodes";
      if (!pool_.cached(c->page))
        error = "page " + std::to_string(c->page) +
                " is in the tree but not cached in the pool";
      if (int64_t(c->tokens.size()) != pool_.pageRows() || c->parent != n)
        error = "node of page " + std::to_string(c->page) + " is malformed";
      walk(c);
    }
  };
  walk(root_.get());
  if (!error.empty())
    return error;
  if (count != nodes_)
    return "node count " + std::to_string(nodes_) + " but the tree has " +
           std::to_string(count);
  for (int64_t p = 0; p < pool_.pages(); ++p)
    if (pool_.cached(int32_t(p)) && !seen[size_t(p)])
      return "page " + std::to_string(p) + " is cached but in no node";
  return "";
}
