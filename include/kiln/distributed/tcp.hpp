// kiln: a process group over TCP: the rendezvous of every rank with rank 0, and sums over the
// ranks of host memory (TcpCommunicator, the backend of CPU training, as gloo is PyTorch's).
//
// Rendezvous. Rank 0 listens on MASTER_PORT; each other rank connects (trying again until the
// timeout, since rank 0 may start last) and sends its rank, the world size and a fingerprint:
// text that must be the same on every rank (the Trainer's: every parameter's name and shape, and
// the training arguments that shape a step). Rank 0 checks them all, then answers each rank with
// either its payload (NCCL's unique id, say) or the error, which every rank then raises: a
// mismatched model is an error on every rank naming the first line that differs, never a hang.
//
// Sums (a star): each rank sends its values to rank 0, which adds them in rank order,
// ((x_0 + x_1) + x_2) + ..., and sends the sum back, so every rank gets the same bits. Each
// message carries its count, and rank 0 checks that the ranks agree.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/core/device.hpp"
#include "kiln/core/errors.hpp"
#include "kiln/distributed/communicator.hpp"
#include "kiln/distributed/environment.hpp"
#include "kiln/distributed/socket.hpp"

namespace kiln::distributed {

class ProcessGroup {
 public:
  // Meets every rank of env (see the top of this file) within `timeout`. On rank 0, payload()
  // gives the bytes every rank receives (not called on the others).
  ProcessGroup(const Environment& env, const std::string& fingerprint, std::chrono::milliseconds timeout,
               const std::function<std::vector<std::byte>()>& payload = {})
      : rank_(env.rank), size_(env.world_size), timeout_(timeout) {
    if (size_ < 2) {  // a group of one: nobody to meet, rank 0's payload is its own
      if (payload) payload_ = payload();
      return;
    }
    if (rank_ == 0) lead(env, fingerprint, payload);
    else join(env, fingerprint);
  }

  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::vector<std::byte>& payload() const { return payload_; }
  std::chrono::milliseconds timeout() const { return timeout_; }

  // data[0 .. count) <- the sum over the ranks, in place (see the top of this file).
  template <class U>
  void all_reduce_sum(U* data, std::size_t count) {
    if (size_ < 2) return;
    const auto deadline = Clock::now() + timeout_;
    const std::uint64_t n = count, bytes = count * sizeof(U);
    if (rank_ != 0) {
      peers_[0].send_all(&n, sizeof n, deadline, "rank 0");
      peers_[0].send_all(data, bytes, deadline, "rank 0");
      std::uint64_t status = 0;
      peers_[0].recv_all(&status, sizeof status, deadline, "rank 0");
      if (status != 0) throw DistributedError(receive_text(peers_[0], deadline, "rank 0"));
      peers_[0].recv_all(data, bytes, deadline, "rank 0");
      return;
    }
    std::vector<U> other(count);
    std::optional<std::string> error;
    for (int r = 1; r < size_; ++r) {
      std::uint64_t m = 0;
      peers_[r].recv_all(&m, sizeof m, deadline, name(r));
      if (m != n) {  // read past its values (the connection stays in step) and tell every rank
        if (!error)
          error = "kiln::distributed: rank " + std::to_string(r) + " sums " + std::to_string(m) + " values where rank 0 sums " +
                  std::to_string(n) + ": the ranks' steps differ";
        discard(peers_[r], m * sizeof(U), deadline, name(r));
        continue;
      }
      peers_[r].recv_all(other.data(), bytes, deadline, name(r));
      if (!error)
        for (std::size_t i = 0; i < count; ++i) data[i] += other[i];
    }
    for (int r = 1; r < size_; ++r) {
      const std::uint64_t status = error ? 1 : 0;
      peers_[r].send_all(&status, sizeof status, deadline, name(r));
      if (error) send_text(peers_[r], *error, deadline, name(r));
      else peers_[r].send_all(data, bytes, deadline, name(r));
    }
    if (error) throw DistributedError(*error);
  }

 private:
  static constexpr std::uint32_t kMagic = 0x6b696c6e;  // "kiln"
  struct Hello {
    std::uint32_t magic, rank, world, pad;
    std::uint64_t fingerprint_bytes;
  };
  static std::string name(int r) { return "rank " + std::to_string(r); }
  static void discard(const Socket& s, std::uint64_t bytes, Clock::time_point deadline, const std::string& peer) {
    char chunk[1 << 16];
    while (bytes > 0) {
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(bytes, sizeof chunk));
      s.recv_all(chunk, n, deadline, peer);
      bytes -= n;
    }
  }
  static void send_text(const Socket& s, const std::string& text, Clock::time_point deadline, const std::string& peer) {
    const std::uint64_t n = text.size();
    s.send_all(&n, sizeof n, deadline, peer);
    s.send_all(text.data(), text.size(), deadline, peer);
  }
  static std::string receive_text(const Socket& s, Clock::time_point deadline, const std::string& peer) {
    std::uint64_t n = 0;
    s.recv_all(&n, sizeof n, deadline, peer);
    if (n > (1u << 26)) throw DistributedError("kiln::distributed: " + peer + " sent a message of " + std::to_string(n) + " bytes: not a kiln rank?");
    std::string text(n, '\0');
    s.recv_all(text.data(), n, deadline, peer);
    return text;
  }
  // The first line where a and b differ, for an error message.
  static std::string first_difference(const std::string& a, const std::string& b, const std::string& who) {
    std::istringstream x(a), y(b);
    std::string lx, ly;
    for (;;) {
      const bool gx = static_cast<bool>(std::getline(x, lx)), gy = static_cast<bool>(std::getline(y, ly));
      if (!gx && !gy) return "";
      if (!gx) lx = "(nothing)";
      if (!gy) ly = "(nothing)";
      if (lx != ly || !gx || !gy) return "rank 0 has \"" + lx + "\" where " + who + " has \"" + ly + "\"";
    }
  }

  void lead(const Environment& env, const std::string& fingerprint, const std::function<std::vector<std::byte>()>& payload) {
    const auto deadline = Clock::now() + timeout_;
    Socket listener = listen_on(env.master_port, size_);
    peers_.resize(static_cast<std::size_t>(size_));
    std::optional<std::string> error;
    std::vector<Socket> strays;  // connections that are not a rank of this run
    int joined = 1;
    try {
      while (joined < size_) {
        Socket s = accept_by(listener, deadline, "waiting for every rank to join");
        Hello h{};
        s.recv_all(&h, sizeof h, deadline, "a joining rank");
        if (h.magic != kMagic) continue;  // not a kiln rank: dropped
        const std::string who = "rank " + std::to_string(h.rank);
        if (h.fingerprint_bytes > (1u << 26)) continue;
        std::string theirs(h.fingerprint_bytes, '\0');
        s.recv_all(theirs.data(), theirs.size(), deadline, who);
        if (!error && static_cast<int>(h.world) != size_)
          error = "kiln::distributed: " + who + " has WORLD_SIZE " + std::to_string(h.world) + ", rank 0 has " + std::to_string(size_);
        else if (!error && (h.rank == 0 || h.rank >= static_cast<std::uint32_t>(size_) || peers_[h.rank].valid()))
          error = "kiln::distributed: two processes joined as " + who + " (or it is out of range): every rank needs its own RANK";
        else if (!error && theirs != fingerprint)
          error = "kiln::distributed: " + who + "'s model or training arguments differ from rank 0's: " +
                  first_difference(fingerprint, theirs, who);
        if (h.rank > 0 && h.rank < static_cast<std::uint32_t>(size_) && !peers_[h.rank].valid()) peers_[h.rank] = std::move(s);
        else strays.push_back(std::move(s));
        ++joined;
      }
    } catch (const DistributedError& e) {
      std::string missing;
      for (int r = 1; r < size_; ++r)
        if (!peers_[static_cast<std::size_t>(r)].valid()) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      std::ostringstream seconds;
      seconds << static_cast<double>(timeout_.count()) / 1000.0;
      error = "kiln::distributed: rank(s) " + missing + " did not join rank 0 within " + seconds.str() + " s (ddp_timeout): " + e.what();
    }
    if (!error && payload) payload_ = payload();
    for (int r = 1; r < size_; ++r) {
      Socket& s = peers_[static_cast<std::size_t>(r)];
      if (!s.valid()) continue;
      const std::uint64_t status = error ? 1 : 0;
      s.send_all(&status, sizeof status, deadline + timeout_, name(r));
      send_text(s, error ? *error : std::string(reinterpret_cast<const char*>(payload_.data()), payload_.size()), deadline + timeout_, name(r));
    }
    for (Socket& s : strays) {  // a second process of one rank: it gets the error too
      const std::uint64_t status = 1;
      s.send_all(&status, sizeof status, deadline + timeout_, "a duplicate rank");
      send_text(s, *error, deadline + timeout_, "a duplicate rank");
    }
    if (error) throw DistributedError(*error);
  }

  void join(const Environment& env, const std::string& fingerprint) {
    const auto deadline = Clock::now() + timeout_;
    peers_.resize(1);
    peers_[0] = connect_by(env.master_addr, env.master_port, deadline);
    const Hello h{kMagic, static_cast<std::uint32_t>(rank_), static_cast<std::uint32_t>(size_), 0, fingerprint.size()};
    peers_[0].send_all(&h, sizeof h, deadline, "rank 0");
    peers_[0].send_all(fingerprint.data(), fingerprint.size(), deadline, "rank 0");
    // Rank 0 answers once every rank has joined: wait up to twice the timeout for it.
    std::uint64_t status = 0;
    peers_[0].recv_all(&status, sizeof status, deadline + timeout_, "rank 0");
    const std::string text = receive_text(peers_[0], deadline + timeout_, "rank 0");
    if (status != 0) throw DistributedError(text);
    payload_.resize(text.size());
    std::memcpy(payload_.data(), text.data(), text.size());
  }

  int rank_, size_;
  std::chrono::milliseconds timeout_;
  std::vector<Socket> peers_;  // rank 0: one per rank (index 0 unused); another rank: rank 0's
  std::vector<std::byte> payload_;
};

// Sums over the ranks of a ProcessGroup, for tensors in host memory.
class TcpCommunicator final : public Communicator {
 public:
  TcpCommunicator(const Environment& env, const std::string& fingerprint, std::chrono::milliseconds timeout)
      : group_(env, fingerprint, timeout) {}
  int rank() const override { return group_.rank(); }
  int size() const override { return group_.size(); }
  void all_reduce_sum(float* data, std::size_t count, Device device) override { host_sum(data, count, device); }
  void all_reduce_sum(double* data, std::size_t count, Device device) override { host_sum(data, count, device); }
  void all_reduce_host(double* data, std::size_t count) override { group_.all_reduce_sum(data, count); }

 private:
  template <class U>
  void host_sum(U* data, std::size_t count, Device device) {
    if (!device.is_cpu())
      throw DeviceError("kiln::distributed: the tcp backend sums host memory; tensors on " + device.str() +
                        " need ddp_backend \"nccl\"");
    group_.all_reduce_sum(data, count);
  }
  ProcessGroup group_;
};

}  // namespace kiln::distributed
