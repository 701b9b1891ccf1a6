package redistest

import "strings"

// NumSlots is the number of hash slots in a Redis Cluster.
const NumSlots = 16384

// Slot returns the cluster hash slot of key (CRC16/XMODEM mod 16384,
// honouring {hash tags}), as CLUSTER KEYSLOT would.
func Slot(key string) uint16 {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc % NumSlots
}
