// SPDX-License-Identifier: Apache-2.0
//
// The job secret: the fixed-size credential a connecting peer presents, and
// the hash that names a job's shared-memory segments without revealing the
// secret. SHA-256 (FIPS 180-4) from OpenSSL's libcrypto.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

namespace accl::emu::transport_detail {

using Sha256Digest = std::array<uint8_t, 32>;

// SHA-256 of `parts` one after the other.
Sha256Digest sha256(std::initializer_list<std::string_view> parts);

// Lower-case hex of `bytes` bytes.
std::string to_hex(const uint8_t* data, size_t bytes);

using Credential = Sha256Digest;

// What a connecting peer presents. Domain-separated from the shm name hash so
// the public name never equals the credential. Empty secret: all zeros.
Credential make_credential(const std::string& job_secret);

// 16 hex digits naming the job's shared-memory segments (shm_segments.hpp).
std::string shm_name_hash(const std::string& job_secret);

// Compares every byte whatever the first difference, so the time taken does
// not tell a guesser how many leading bytes were right.
bool constant_time_equal(const uint8_t* a, const uint8_t* b, size_t bytes);

}  // namespace accl::emu::transport_detail
