package redistest

import "github.com/goredisson/locks/internal/names"

// NumSlots is the number of hash slots in a Redis Cluster.
const NumSlots = names.NumSlots

// Slot returns the cluster hash slot of key (CRC16/XMODEM mod 16384,
// honouring {hash tags}), as CLUSTER KEYSLOT would.
func Slot(key string) uint16 { return names.Slot(key) }
