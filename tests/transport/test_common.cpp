// SPDX-License-Identifier: Apache-2.0
//
// Helpers shared by the transports: SHA-256 credential, CRC32C, handshake
// identity checks, deadline arithmetic.
#include "crc32c.hpp"
#include "hello_protocol.hpp"
#include "job_secret.hpp"
#include "socket_address.hpp"
#include "socket_io.hpp"

#include <gtest/gtest.h>

namespace accl::emu {
namespace {

using namespace transport_detail;
using namespace std::chrono_literals;

std::string sha256_hex(const std::string& s) {
  auto d = sha256({s});
  return to_hex(d.data(), d.size());
}

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  // Parts hash as one message.
  auto d = sha256({"ab", "c"});
  EXPECT_EQ(to_hex(d.data(), d.size()), sha256_hex("abc"));
}

// The values of the hand-written SHA-256 this project used before OpenSSL's:
// ranks of both builds still accept each other's credentials, and a new
// transport still recognizes the old segments' names.
TEST(Sha256, CredentialAndShmNameAsBefore) {
  const Credential c = make_credential("job-secret-42");
  EXPECT_EQ(to_hex(c.data(), c.size()), "231d47fac3c804a0bea10d1fae2ef7204e5e549e3acf015ceaf41a3a6e41fc33");
  const Credential s = make_credential("s");
  EXPECT_EQ(to_hex(s.data(), s.size()), "c69ae143ec3e19addf9963660eb293256abd285dfe25554f73d4e6e845bd0b8e");
  EXPECT_EQ(shm_name_hash("job-secret-42"), "45a082678a29f84d");
  EXPECT_EQ(shm_name_hash("a guess"), "b41d7dc252b07a51");
}

TEST(Crc32c, KnownVectorBothImplementations) {
  const std::string s = "123456789";
  EXPECT_EQ(crc32c_update_table(~0u, s.data(), s.size()) ^ ~0u, 0xE3069283u);
  EXPECT_EQ(crc32c_update(~0u, s.data(), s.size()) ^ ~0u, 0xE3069283u);
  std::vector<uint8_t> big(100003);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 31 + 7);
  EXPECT_EQ(crc32c_update(~0u, big.data(), big.size()), crc32c_update_table(~0u, big.data(), big.size()));
}

TEST(Credential, EmptySecretIsZeroAndSecretsDiffer) {
  EXPECT_EQ(make_credential(""), Credential{});
  EXPECT_NE(make_credential("a"), make_credential("b"));
  EXPECT_EQ(make_credential("a"), make_credential("a"));
}

TEST(Credential, ConstantTimeEqual) {
  uint8_t a[32] = {}, b[32] = {};
  EXPECT_TRUE(constant_time_equal(a, b, 32));
  b[31] = 1;
  EXPECT_FALSE(constant_time_equal(a, b, 32));
}

TEST(Handshake, IdentityChecks) {
  const Credential right = make_credential("s");
  HelloIdentity id = make_identity(kHelloTcp, NetAddress{0x7F000001u, 9}, right);
  EXPECT_EQ(check_identity(id, kHelloTcp, right, true), kHelloAccepted);
  EXPECT_EQ(check_identity(id, kHelloShm, right, true), kHelloMalformed);
  EXPECT_EQ(check_identity(id, kHelloTcp, make_credential("t"), true), kHelloBadSecret);
  EXPECT_EQ(check_identity(id, kHelloTcp, make_credential("t"), false), kHelloAccepted);
  id.magic = 0;
  EXPECT_EQ(check_identity(id, kHelloTcp, right, false), kHelloMalformed);
  // A peer is delivered as the identity it names: a wildcard or port 0
  // names nobody (issue 38: such a hello used to be replaced by the
  // connection's source address).
  EXPECT_EQ(check_identity(make_identity(kHelloTcp, NetAddress{0, 9}, right), kHelloTcp, right, true),
            kHelloMalformed);
  EXPECT_EQ(check_identity(make_identity(kHelloTcp, NetAddress{0x7F000001u, 0}, right), kHelloTcp, right, true),
            kHelloMalformed);
}

TEST(Deadlines, WaitMsIsCappedAndRoundsUp) {
  EXPECT_EQ(wait_ms(Clock::now() - 1s, 100ms), 0);
  EXPECT_EQ(wait_ms(Clock::now() + 10s, 100ms), 100);
  EXPECT_EQ(wait_ms(Clock::now() + 300us, 100ms), 1);
}

TEST(Addresses, Format) {
  EXPECT_EQ(format_address(NetAddress{0x0A0A0A01u, 5001}), "10.10.10.1:5001");
  EXPECT_TRUE(is_local_ipv4(0x7F000001u));
  EXPECT_FALSE(is_local_ipv4(0xC0000201u));  // TEST-NET-1
}

TEST(Addresses, AWildcardBindIsKnownByAnAddressOfThisHost) {
  const NetAddress concrete{0x7F000001u, 7};
  EXPECT_TRUE(identity_address(concrete) == concrete);
  const NetAddress id = identity_address(NetAddress{0, 7});
  EXPECT_NE(id.ip, 0u);
  EXPECT_TRUE(is_local_ipv4(id.ip)) << format_address(id);
  EXPECT_EQ(id.port, 7);
}

}  // namespace
}  // namespace accl::emu
