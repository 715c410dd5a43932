// SPDX-License-Identifier: Apache-2.0
#include "job_secret.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <memory>
#include <stdexcept>

namespace accl::emu::transport_detail {

Sha256Digest sha256(std::initializer_list<std::string_view> parts) {
  const std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  Sha256Digest digest{};
  unsigned int length = 0;
  bool ok = ctx != nullptr && EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) == 1;
  for (std::string_view part : parts) ok = ok && EVP_DigestUpdate(ctx.get(), part.data(), part.size()) == 1;
  ok = ok && EVP_DigestFinal_ex(ctx.get(), digest.data(), &length) == 1 && length == digest.size();
  // Only an OpenSSL without its default provider (a broken install) fails here.
  if (!ok) throw std::runtime_error("SHA-256 (OpenSSL libcrypto) is not available");
  return digest;
}

std::string to_hex(const uint8_t* data, size_t bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * bytes);
  for (size_t i = 0; i < bytes; ++i) {
    out.push_back(digits[data[i] >> 4]);
    out.push_back(digits[data[i] & 0xF]);
  }
  return out;
}

Credential make_credential(const std::string& job_secret) {
  if (job_secret.empty()) return Credential{};
  return sha256({"accl-emu-credential-v1\n", job_secret});
}

std::string shm_name_hash(const std::string& job_secret) {
  const Sha256Digest h = sha256({"accl-emu-shm-name-v1\n", job_secret});
  return to_hex(h.data(), 8);
}

bool constant_time_equal(const uint8_t* a, const uint8_t* b, size_t bytes) {
  return CRYPTO_memcmp(a, b, bytes) == 0;
}

}  // namespace accl::emu::transport_detail
