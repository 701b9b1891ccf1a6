package rlock

import (
	"fmt"
	"strings"
	"unsafe"
)

// Key and channel prefixes of Redisson's RLock (contract 1.1).
const (
	channelPrefix = "redisson_lock__channel"
	latchPrefix   = "redisson_unlock_latch"
)

// prefixName is Redisson's prefixName: "<prefix>:<name>" when name contains
// "{" anywhere (the user's hash tag, valid or not, decides the slot),
// otherwise "<prefix>:{<name>}".
func prefixName(prefix, name string) string {
	if strings.Contains(name, "{") {
		return prefix + ":" + name
	}
	return prefix + ":{" + name + "}"
}

// suffixName is Redisson's suffixName: "<name>:<suffix>" when name contains
// "{", otherwise "{<name>}:<suffix>".
func suffixName(name, suffix string) string {
	if strings.Contains(name, "{") {
		return name + ":" + suffix
	}
	return "{" + name + "}:" + suffix
}

// ChannelName returns the pub/sub channel of the RLock called name.
func ChannelName(name string) string { return prefixName(channelPrefix, name) }

// LatchName returns the unlock latch key of the RLock called name for one
// unlock request id (32 hex characters).
func LatchName(name, requestID string) string {
	return suffixName(prefixName(latchPrefix, name), requestID)
}

// newLatchName returns LatchName(name, <a fresh request id>) in one
// allocation.
func newLatchName(name string) string {
	b := make([]byte, 0, len(latchPrefix)+len(name)+38)
	b = append(b, latchPrefix...)
	if strings.Contains(name, "{") {
		b = append(b, ':')
		b = append(b, name...)
	} else {
		b = append(b, ":{"...)
		b = append(b, name...)
		b = append(b, '}')
	}
	b = append(b, ':')
	b = appendRequestID(b)
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// checkName reports why name cannot be used as a lock name. In cluster mode
// the lock key, its channel and its latch keys must share one hash slot (the
// scripts touch them together, and rueidis panics on a cross-slot command).
// That fails only for a name with a "{" but no usable hash tag, such as
// "a{b" or "{}x": Redisson adds no braces to such names.
func checkName(name string, cluster bool) error {
	if name == "" {
		return fmt.Errorf("%w: the name is empty", ErrInvalidName)
	}
	if cluster {
		ks, cs := Slot(name), Slot(ChannelName(name))
		ls := Slot(LatchName(name, "00000000000000000000000000000000"))
		if ks != cs || ks != ls {
			return fmt.Errorf("%w: %q: the lock key (slot %d) and its channel %q (slot %d) would fall in different cluster slots; "+
				"a name containing '{' must carry a complete, non-empty hash tag such as \"{user42}:cart\"",
				ErrInvalidName, name, ks, ChannelName(name), cs)
		}
	}
	return nil
}

// Slot returns the Redis Cluster hash slot of key: CRC16 (XMODEM) of the
// key, or of its hash tag (the text between the first "{" and the next "}",
// when that is not empty), modulo 16384.
func Slot(key string) uint16 {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return crc16(key) & 16383
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
