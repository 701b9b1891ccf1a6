// Package names builds the Redis keys and channels of Redisson's lock
// family from an object's raw name (PROTOCOL.md 1.3), and computes cluster
// hash slots. It is the one CRC16 of the project: the test harness uses it
// too.
package names

import (
	"strings"
	"unsafe"
)

// NumSlots is the number of hash slots in a Redis Cluster.
const NumSlots = 16384

// Prefixes of the keys and channels of Redisson's RLock (PROTOCOL.md 2.1), and
// of this library's own fence keys (Java never reads them).
const (
	LockChannelPrefix   = "redisson_lock__channel"
	RWLockChannelPrefix = "redisson_rwlock"     // the read-write lock's channel (PROTOCOL.md 5.1)
	TokenPrefix         = "redisson_lock_token" // the fenced lock's token (PROTOCOL.md 7)
	FencePrefix         = "goredisson_fence"
	QueuePrefix         = "redisson_lock_queue"   // the fair lock's wait queue (PROTOCOL.md 4.1)
	TimeoutPrefix       = "redisson_lock_timeout" // the fair lock's reservations (PROTOCOL.md 4.1)
	SemaphorePrefix     = "redisson_sc"           // the semaphores' channel (PROTOCOL.md 10, 11)
	LatchChannelPrefix  = "redisson_countdownlatch__channel__"
	RecordPrefix        = "goredisson_ops" // this library's record keys (Java never reads them)
)

// SemaphoreChannel returns the channel of the semaphore or permit-expirable
// semaphore called name, "redisson_sc:{<name>}" (Prefix rules).
func SemaphoreChannel(name string) string { return Prefix(SemaphorePrefix, name) }

// PermitTimeouts returns the zset of the permit-expirable semaphore called
// name's held permits, "{<name>}:timeout" (Suffix rules).
func PermitTimeouts(name string) string { return Suffix(name, "timeout") }

// LatchChannel returns the channel of the count-down latch called name:
// "redisson_countdownlatch__channel__{<name>}", braces always (PROTOCOL.md
// 12: no Prefix rule).
func LatchChannel(name string) string { return LatchChannelPrefix + "{" + name + "}" }

// Record returns the record key of the client clientID's recorded calls on
// the object called name, "goredisson_ops:{<name>}:<clientID>" (Prefix
// rules), in name's slot.
func Record(name, clientID string) string { return Prefix(RecordPrefix, name) + ":" + clientID }

// Prefix is Redisson's prefixName: "<prefix>:<name>" when name contains "{"
// anywhere (the user's hash tag, valid or not, decides the slot), otherwise
// "<prefix>:{<name>}".
func Prefix(prefix, name string) string {
	if strings.Contains(name, "{") {
		return prefix + ":" + name
	}
	return prefix + ":{" + name + "}"
}

// Suffix is Redisson's suffixName: "<name>:<suffix>" when name contains "{",
// otherwise "{<name>}:<suffix>".
func Suffix(name, suffix string) string {
	if strings.Contains(name, "{") {
		return name + ":" + suffix
	}
	return "{" + name + "}:" + suffix
}

// LockChannel returns the pub/sub channel of the RLock called name.
func LockChannel(name string) string { return Prefix(LockChannelPrefix, name) }

// RWLockChannel returns the pub/sub channel of the read-write lock called
// name.
func RWLockChannel(name string) string { return Prefix(RWLockChannelPrefix, name) }

// Queue returns the wait queue (a list) of the fair lock called name.
func Queue(name string) string { return Prefix(QueuePrefix, name) }

// Timeouts returns the reservations (a sorted set) of the fair lock called
// name's waiters.
func Timeouts(name string) string { return Prefix(TimeoutPrefix, name) }

// Token returns the token key of the fenced lock called name.
func Token(name string) string { return Prefix(TokenPrefix, name) }

// ReadTimeoutPrefix returns the prefix of the read hold timeout keys of
// the owner field on the read-write lock called name,
// "{<name>}:<field>:rwlock_timeout" (Suffix rules; PROTOCOL.md 5.1).
func ReadTimeoutPrefix(name, field string) string { return Suffix(name, field+":rwlock_timeout") }

// KeyPrefix returns the part of every read timeout prefix before the
// field: "{<name>}", or name itself when it contains "{".
func KeyPrefix(name string) string {
	if strings.Contains(name, "{") {
		return name
	}
	return "{" + name + "}"
}

// Fence returns the fence key of one operation on the object called name:
// "goredisson_fence:{<name>}:<id>" (Prefix rules), in name's slot. id is
// appended by appendID, so the key is built in one allocation.
func Fence(name string, appendID func([]byte) []byte) string {
	b := make([]byte, 0, len(FencePrefix)+len(name)+40)
	b = append(b, FencePrefix...)
	if strings.Contains(name, "{") {
		b = append(b, ':')
		b = append(b, name...)
	} else {
		b = append(b, ":{"...)
		b = append(b, name...)
		b = append(b, '}')
	}
	b = append(b, ':')
	b = appendID(b)
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// Slot returns the Redis Cluster hash slot of key: CRC16 (XMODEM) of the
// key, or of its hash tag (the text between the first "{" and the next "}",
// when that is not empty), modulo 16384, as CLUSTER KEYSLOT computes it.
func Slot(key string) uint16 {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return crc16(key) % NumSlots
}

var crcTable = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()

func crc16(s string) uint16 {
	var c uint16
	for i := 0; i < len(s); i++ {
		c = c<<8 ^ crcTable[byte(c>>8)^s[i]]
	}
	return c
}
