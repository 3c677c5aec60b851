// The Responder of a Session: how a handler answers, from any thread.
#include <list>
#include <mutex>
#include <string>
#include <utility>

#include "http/http_protocol.h"
#include "http/http_session.h"

namespace sightline::api::http_internal {

namespace {

// Answers one request of a session; safe to call from any thread. Its
// reference to the session is kept in the server's ResponderLinks, and used
// under their lock, so that the server can drop it when it stops.
class SessionResponder : public Responder {
 public:
  SessionResponder(std::shared_ptr<ResponderLinks> links, std::shared_ptr<Session> s)
      : links_(std::move(links)),
        seq_(s->seq()),
        version_(s->version()),
        keep_alive_(s->keep_alive()) {
    std::lock_guard<std::mutex> g(links_->mu);
    if (!links_->open) return;
    links_->sessions.push_front(std::move(s));
    link_ = links_->sessions.begin();
    linked_ = true;
  }
  ~SessionResponder() override {
    // Released after the lock: the session's destructor may drop other
    // responders (those its disconnect callback holds).
    std::list<std::shared_ptr<Session>> dropped;
    std::lock_guard<std::mutex> g(links_->mu);
    if (linked_ && links_->open) dropped.splice(dropped.begin(), links_->sessions, link_);
  }
  void Send(HttpResponse r) override {
    Post([r = std::move(r), ka = keep_alive_](Session& s) mutable { s.Finish(std::move(r), ka); });
  }
  void StartStream(int status, std::string type,
                   std::map<std::string, std::string> headers) override {
    Post([status, type = std::move(type), headers = std::move(headers)](Session& s) mutable {
      s.StreamHeader(status, std::move(type), std::move(headers));
    });
  }
  void Write(std::string chunk) override {
    if (chunk.empty()) return;  // a zero-size chunk would end the stream
    // HTTP/1.0 has no chunked coding: its stream is the raw bytes, ended by
    // closing the connection (RFC 9112 §6.3 item 8).
    const std::size_t payload = chunk.size();
    if (version_ >= 11) FrameChunk(&chunk);
    WithSession([&](Session& s) { s.PostChunk(seq_, std::move(chunk), payload, &spare_); });
  }
  std::string ChunkBuffer() override { return std::exchange(spare_, std::string()); }
  void End(std::string last_chunk) override {
    const std::size_t payload = last_chunk.size();
    if (!last_chunk.empty() && version_ >= 11) FrameChunk(&last_chunk);
    Post([wire = std::move(last_chunk), payload](Session& s) mutable {
      s.EndStream(std::move(wire), payload);
    });
  }
  void OnDisconnect(std::function<void()> cb) override {
    Post([cb = std::move(cb)](Session& s) mutable { s.SetOnDisconnect(std::move(cb)); });
  }

 private:
  // `g` with the session, under the links' lock; once the server has
  // stopped, nothing: the session may be gone, and its io_context with it.
  template <typename G>
  void WithSession(G g) {
    std::lock_guard<std::mutex> lock(links_->mu);
    if (linked_ && links_->open) g(**link_);
  }
  template <typename F>
  void Post(F f) {
    WithSession([&](Session& s) { s.Post(seq_, std::move(f)); });
  }

  const std::shared_ptr<ResponderLinks> links_;
  std::list<std::shared_ptr<Session>>::iterator link_;
  bool linked_ = false;
  const std::uint64_t seq_;
  const unsigned version_;
  const bool keep_alive_;
  // A written chunk's buffer for ChunkBuffer(), from the lane (Write's
  // callers are one thread at a time, as ChunkBuffer's).
  std::string spare_;
};

}  // namespace

void SeverResponders(HttpCore* core) {
  std::list<std::shared_ptr<Session>> dropped;  // released after the lock, as above
  std::lock_guard<std::mutex> g(core->links->mu);
  core->links->open = false;
  dropped.swap(core->links->sessions);
}

std::shared_ptr<Responder> MakeResponder(std::shared_ptr<ResponderLinks> links,
                                         std::shared_ptr<Session> session) {
  return std::make_shared<SessionResponder>(std::move(links), std::move(session));
}

}  // namespace sightline::api::http_internal
