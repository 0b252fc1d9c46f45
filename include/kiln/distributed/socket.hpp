// kiln: the TCP sockets of a process group (POSIX): a listener, a connection made with retries,
// and sends and receives of whole messages, every wait bounded by a deadline. Every failure is a
// DistributedError naming what was being done and with whom.
#pragma once
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <string>
#include <thread>
#include <utility>

#include "kiln/core/errors.hpp"

namespace kiln::distributed {

using Clock = std::chrono::steady_clock;

class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Socket& operator=(Socket&& o) noexcept {
    if (this != &o) close(), fd_ = std::exchange(o.fd_, -1);
    return *this;
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() { close(); }

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  // The whole of [data, data + bytes) to the peer, by the deadline.
  void send_all(const void* data, std::size_t bytes, Clock::time_point deadline, const std::string& peer) const {
    const auto* p = static_cast<const char*>(data);
    while (bytes > 0) {
      wait(POLLOUT, deadline, "sending to " + peer);
      const ssize_t n = ::send(fd_, p, bytes, MSG_NOSIGNAL);
      if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
      if (n <= 0) throw DistributedError("kiln::distributed: sending to " + peer + " failed: " + std::strerror(errno) + " (did it stop?)");
      p += n, bytes -= static_cast<std::size_t>(n);
    }
  }
  // Exactly `bytes` from the peer into data, by the deadline.
  void recv_all(void* data, std::size_t bytes, Clock::time_point deadline, const std::string& peer) const {
    auto* p = static_cast<char*>(data);
    while (bytes > 0) {
      wait(POLLIN, deadline, "waiting for " + peer);
      const ssize_t n = ::recv(fd_, p, bytes, 0);
      if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
      if (n == 0) throw DistributedError("kiln::distributed: " + peer + " closed the connection (it stopped or failed)");
      if (n < 0) throw DistributedError("kiln::distributed: receiving from " + peer + " failed: " + std::strerror(errno));
      p += n, bytes -= static_cast<std::size_t>(n);
    }
  }
  // Until the socket is ready for `events`; a DistributedError at the deadline.
  void wait(short events, Clock::time_point deadline, const std::string& what) const {
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) throw DistributedError("kiln::distributed: timed out " + what);
      pollfd p{fd_, events, 0};
      const int r = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000)));
      if (r > 0) return;  // ready, or an error the next call reports
      if (r < 0 && errno != EINTR) throw DistributedError("kiln::distributed: poll failed " + what + ": " + std::strerror(errno));
    }
  }

 private:
  int fd_ = -1;
};

namespace detail {
inline void no_delay(const Socket& s) {
  int one = 1;
  ::setsockopt(s.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}
inline void non_blocking(const Socket& s) { ::fcntl(s.fd(), F_SETFL, ::fcntl(s.fd(), F_GETFL, 0) | O_NONBLOCK); }
}  // namespace detail

// A socket listening on `port` of every interface of this host.
inline Socket listen_on(int port, int backlog) {
  Socket s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s.valid()) throw DistributedError(std::string("kiln::distributed: socket() failed: ") + std::strerror(errno));
  int one = 1;
  ::setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET, a.sin_addr.s_addr = htonl(INADDR_ANY), a.sin_port = htons(static_cast<std::uint16_t>(port));
  if (::bind(s.fd(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(s.fd(), backlog) != 0)
    throw DistributedError("kiln::distributed: rank 0 cannot listen on port " + std::to_string(port) + ": " + std::strerror(errno) +
                           " (is another run using MASTER_PORT " + std::to_string(port) + "?)");
  detail::non_blocking(s);
  return s;
}

// The port a listening socket has (listen_on(0, ...) lets the system choose one).
inline int port_of(const Socket& s) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  ::getsockname(s.fd(), reinterpret_cast<sockaddr*>(&a), &len);
  return ntohs(a.sin_port);
}

// The next connection to `listener`, by the deadline.
inline Socket accept_by(const Socket& listener, Clock::time_point deadline, const std::string& what) {
  for (;;) {
    listener.wait(POLLIN, deadline, what);
    Socket s(::accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC));
    if (s.valid()) {
      detail::non_blocking(s);
      detail::no_delay(s);
      return s;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
      throw DistributedError(std::string("kiln::distributed: accept failed: ") + std::strerror(errno));
  }
}

// A connection to host:port, tried again every 50 ms until it is accepted or the deadline
// passes (rank 0 may start listening after the others start).
inline Socket connect_by(const std::string& host, int port, Clock::time_point deadline) {
  addrinfo hints{};
  hints.ai_family = AF_INET, hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string where = host + ":" + std::to_string(port);
  if (const int e = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); e != 0)
    throw DistributedError("kiln::distributed: MASTER_ADDR " + host + " does not resolve: " + ::gai_strerror(e));
  std::string last = "no address";
  for (;;) {
    for (addrinfo* a = found; a; a = a->ai_next) {
      // Non-blocking, so that a host that drops the attempt costs no more than the deadline.
      Socket s(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
      if (!s.valid()) {
        last = std::strerror(errno);
        continue;
      }
      int error = ::connect(s.fd(), a->ai_addr, a->ai_addrlen) == 0 ? 0 : errno;
      if (error == EINPROGRESS) {
        pollfd p{s.fd(), POLLOUT, 0};
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
        socklen_t len = sizeof error;
        error = ::poll(&p, 1, static_cast<int>(std::clamp<long long>(left, 1, 1000))) == 1 &&
                        ::getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &error, &len) == 0
                    ? error
                    : ETIMEDOUT;
      }
      if (error == 0) {
        ::freeaddrinfo(found);
        detail::no_delay(s);
        return s;
      }
      last = std::strerror(error);
    }
    if (Clock::now() >= deadline) {
      ::freeaddrinfo(found);
      throw DistributedError("kiln::distributed: could not reach rank 0 at " + where + " before the timeout (" + last +
                             "): is rank 0 running, and are MASTER_ADDR and MASTER_PORT the same for every rank?");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace kiln::distributed
