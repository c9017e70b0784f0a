package auth

import (
	"encoding/hex"
	"testing"
)

// sipHash128Vectors are the SipHash-2-4-128 outputs its authors publish
// with their reference code (vectors.h, vectors_sip128), for the key
// 00 01 … 0f and the messages 00 01 … n-1, n = 0 … 63 (the index).
var sipHash128Vectors = [64]string{
	"a3817f04ba25a8e66df67214c7550293", // 0
	"da87c1d86b99af44347659119b22fc45", // 1
	"8177228da4a45dc7fca38bdef60affe4", // 2
	"9c70b60c5267a94e5f33b6b02985ed51", // 3
	"f88164c12d9c8faf7d0f6e7c7bcd5579", // 4
	"1368875980776f8854527a07690e9627", // 5
	"14eeca338b208613485ea0308fd7a15e", // 6
	"a1f1ebbed8dbc153c0b84aa61ff08239", // 7
	"3b62a9ba6258f5610f83e264f31497b4", // 8
	"264499060ad9baabc47f8b02bb6d71ed", // 9
	"00110dc378146956c95447d3f3d0fbba", // 10
	"0151c568386b6677a2b4dc6f81e5dc18", // 11
	"d626b266905ef35882634df68532c125", // 12
	"9869e247e9c08b10d029934fc4b952f7", // 13
	"31fcefac66d7de9c7ec7485fe4494902", // 14
	"5493e99933b0a8117e08ec0f97cfc3d9", // 15
	"6ee2a4ca67b054bbfd3315bf85230577", // 16
	"473d06e8738db89854c066c47ae47740", // 17
	"a426e5e423bf4885294da481feaef723", // 18
	"78017731cf65fab074d5208952512eb1", // 19
	"9e25fc833f2290733e9344a5e83839eb", // 20
	"568e495abe525a218a2214cd3e071d12", // 21
	"4a29b54552d16b9a469c10528eff0aae", // 22
	"c9d184ddd5a9f5e0cf8ce29a9abf691c", // 23
	"2db479ae78bd50d8882a8a178a6132ad", // 24
	"8ece5f042d5e447b5051b9eacb8d8f6f", // 25
	"9c0b53b4b3c307e87eaee08678141f66", // 26
	"abf248af69a6eae4bfd3eb2f129eeb94", // 27
	"0664da1668574b88b935f3027358aef4", // 28
	"aa4b9dc4bf337de90cd4fd3c467c6ab7", // 29
	"ea5c7f471faf6bde2b1ad7d4686d2287", // 30
	"2939b0183223fafc1723de4f52c43d35", // 31
	"7c3956ca5eeafc3e363e9d556546eb68", // 32
	"77c6077146f01c32b6b69d5f4ea9ffcf", // 33
	"37a6986cb8847edf0925f0f1309b54de", // 34
	"a705f0e69da9a8f907241a2e923c8cc8", // 35
	"3dc47d1f29c448461e9e76ed904f6711", // 36
	"0d62bf01e6fc0e1a0d3c4751c5d3692b", // 37
	"8c03468bca7c669ee4fd5e084bbee7b5", // 38
	"528a5bb93baf2c9c4473cce5d0d22bd9", // 39
	"df6a301e95c95dad97ae0cc8c6913bd8", // 40
	"801189902c857f39e73591285e70b6db", // 41
	"e617346ac9c231bb3650ae34ccca0c5b", // 42
	"27d93437efb721aa401821dcec5adf89", // 43
	"89237d9ded9c5e78d8b1c9b166cc7342", // 44
	"4a6d8091bf5e7d651189fa94a250b14c", // 45
	"0e33f96055e7ae893ffc0e3dcf492902", // 46
	"e61c432b720b19d18ec8d84bdc63151b", // 47
	"f7e5aef549f782cf379055a608269b16", // 48
	"438d030fd0b7a54fa837f2ad201a6403", // 49
	"a590d3ee4fbf04e3247e0d27f286423f", // 50
	"5fe2c1a172fe93c4b15cd37caef9f538", // 51
	"2c97325cbd06b36eb2133dd08b3a017c", // 52
	"92c814227a6bca949ff0659f002ad39e", // 53
	"dce850110bd8328cfbd50841d6911d87", // 54
	"67f14984c7da791248e32bb5922583da", // 55
	"1938f2cf72d54ee97e94166fa91d2a36", // 56
	"74481e9646ed49fe0f6224301604698e", // 57
	"57fca5de98a9d6d8006438d0583d8a1d", // 58
	"9fecde1cefdc1cbed4763674d9575359", // 59
	"e3040c00eb28f15366ca73cbd872e740", // 60
	"7697009a6a831dfecca91c5993670f7a", // 61
	"5853542321f567a005d547a4f04759bd", // 62
	"5150d1772f50834a503e069a973fbd7c", // 63
}

// TestSipHash128Vectors checks sipHash128 against the authors' vectors:
// every message length from empty to eight words, so each count of tail
// bytes and the length byte are covered.
func TestSipHash128Vectors(t *testing.T) {
	var key [16]byte
	msg := make([]byte, 64)
	for i := range 16 {
		key[i] = byte(i)
	}
	for i := range msg {
		msg[i] = byte(i)
	}
	k := sipKeyOf(key)
	for n, want := range sipHash128Vectors {
		got := sipHash128(k, string(msg[:n]))
		if hex.EncodeToString(got[:]) != want {
			t.Errorf("message of %d bytes: got %x, want %s", n, got, want)
		}
	}
}

// TestSipHash128Keyed checks that the key matters: the same message
// under two keys that differ in one bit of either half gives unrelated
// outputs (a memo keyed by an unkeyed hash would be open to collisions
// chosen in advance).
func TestSipHash128Keyed(t *testing.T) {
	const msg = "gh-0123456789ABCDEFGHIJKLMNOPQRSTUV"
	base := sipHash128(sipKey{1, 2}, msg)
	for _, k := range []sipKey{{0, 2}, {1, 3}, {1 ^ 1<<63, 2}, {1, 2 ^ 1<<63}} {
		if got := sipHash128(k, msg); got == base {
			t.Errorf("key %x: same output as key {1 2}", k)
		}
	}
}
