// Stop strings in streamed text, at a cost per token that depends only on
// the new text: not on how many stop strings a request has, nor on their
// length (a client chooses both).
//
// StopStrings is an Aho-Corasick automaton over a request's stop strings,
// compiled once per request and shared, immutable, by all its choices. Each
// choice's StopMatcher then holds an automaton state and the text it may not
// release yet: the longest suffix of the text so far that is a prefix of some
// stop string (the depth of the state), never more.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace sightline::api {

class StopStrings {
 public:
  // Empty strings are ignored (they match nothing). Building costs
  // O(total bytes of `stops`), memory too.
  static std::shared_ptr<const StopStrings> Compile(const std::vector<std::string>& stops);

  bool empty() const { return nodes_.size() <= 1; }

 private:
  friend class StopMatcher;
  struct Node {
    std::uint32_t depth = 0;
    std::uint32_t fail = 0;          // the longest proper suffix that is a trie node
    std::uint32_t out = 0;           // the longest suffix that is a whole stop (0: none)
    std::int32_t stop = -1;          // the first stop string equal to this node's text
    std::uint32_t first_child = 0;   // trie children, while building (0: none)
    std::uint32_t next_sibling = 0;  //
    std::uint8_t byte = 0;           // on the edge from the parent
  };

  StopStrings() = default;
  // The trie child of `node` by `byte`, 0 if none.
  std::uint32_t Child(std::uint32_t node, std::uint8_t byte) const;
  // The automaton's transition: amortized O(1) over a text.
  std::uint32_t Next(std::uint32_t state, std::uint8_t byte) const;
  void AddEdge(std::uint32_t parent, std::uint8_t byte, std::uint32_t child);
  void Rehash(std::size_t capacity);  // a power of two

  std::vector<std::string> stops_;
  std::vector<Node> nodes_;  // nodes_[0] is the root
  std::uint32_t root_[256] = {};
  // Open addressing over (parent, byte) for the edges below the root.
  std::vector<std::uint64_t> keys_;  // (parent << 8 | byte) + 1; 0 = empty
  std::vector<std::uint32_t> children_;
  std::uint64_t mask_ = 0;
};

// Finds stop strings in one choice's streamed text. Text that could still
// become the start of a stop string is held back; once a stop string
// appears, the text before it is released and the match reported (the stop
// string itself is never emitted). Of the stop strings found in one Feed,
// the one starting earliest wins, and of those starting at the same byte the
// one listed first (vLLM's and this server's long-standing choice).
class StopMatcher {
 public:
  explicit StopMatcher(std::shared_ptr<const StopStrings> stops);
  // Compiles its own automaton: for one-off use; requests share one.
  explicit StopMatcher(const std::vector<std::string>& stops);

  struct Result {
    std::string text;  // safe to emit now
    bool stopped = false;
    std::string stop;  // which stop string matched
  };
  // Costs amortized O(delta.size()). After a stop, matching starts afresh.
  Result Feed(std::string_view delta);
  std::string Flush();  // at the end: the held-back text is not a stop after all

 private:
  std::shared_ptr<const StopStrings> stops_;
  std::uint32_t state_ = 0;
  std::string buffer_;    // [head_, size) is held back
  std::size_t head_ = 0;  // released bytes still in buffer_, dropped in bulk
};

}  // namespace sightline::api
