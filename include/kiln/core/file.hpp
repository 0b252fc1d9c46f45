// kiln: opening files that are read whole (the autotune cache, checkpoints and their indexes)
// without the traps of a path that is not a plain file: a FIFO would block the open until a
// writer comes, and a device such as /dev/zero never ends. RegularFile opens read-only and
// non-blocking, then refuses anything that is not a regular file before a byte is read. POSIX
// only (kiln's CPU and GPU hosts).
#pragma once
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <optional>
#include <string>

namespace kiln::detail {

class RegularFile {
 public:
  // On failure ok() is false and why is "cannot be opened" (error() holds open's errno) or
  // "not a regular file".
  RegularFile(const char* path, std::string& why) {
    fd_ = ::open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd_ < 0) {
      error_ = errno;
      why = "cannot be opened";
      return;
    }
    struct stat st {};
    if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd_);
      fd_ = -1;
      why = "not a regular file";
      return;
    }
    size_ = static_cast<std::size_t>(st.st_size);
  }
  ~RegularFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  RegularFile(const RegularFile&) = delete;
  RegularFile& operator=(const RegularFile&) = delete;

  bool ok() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  int error() const { return error_; }
  std::size_t size() const { return size_; }  // as fstat saw it when opened

  // Its bytes, size() of them at most (fewer if it shrank since it was opened), or nothing on
  // a read error.
  std::optional<std::string> read_all() const {
    std::string text(size_, '\0');
    std::size_t got = 0;
    while (got < text.size()) {
      const ::ssize_t n = ::read(fd_, text.data() + got, text.size() - got);
      if (n < 0) return std::nullopt;
      if (n == 0) break;
      got += static_cast<std::size_t>(n);
    }
    text.resize(got);
    return text;
  }

 private:
  int fd_ = -1, error_ = 0;
  std::size_t size_ = 0;
};

}  // namespace kiln::detail
