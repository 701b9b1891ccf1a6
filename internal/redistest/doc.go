// Package redistest starts real Redis servers for tests and demos: a
// standalone server, n independent masters, a Redis Cluster, or a Sentinel
// group. Redis is never mocked.
//
// Every process the package starts
//   - is a real redis-server (or redis-server --sentinel) child process,
//   - listens on 127.0.0.1 only, on a free port chosen by the package
//     (bind races are retried with fresh ports),
//   - runs in its own temporary directory (its dir, logfile and any
//     nodes.conf/sentinel.conf), with --save "" and --appendonly no, so
//     nothing is ever persisted,
//   - is in its own process group and, on Linux, receives SIGKILL if the
//     process that started it dies (Pdeathsig),
//   - is killed with SIGKILL, and its directory removed, by Close.
//
// The core API (StartServer, StartMasters, StartCluster, StartSentinel)
// returns errors and can be used from any program. The testing.TB wrappers
// (Standalone, Masters, Cluster, Sentinel and their *With variants) call
// t.Fatalf on failure, never t.Skip, and register t.Cleanup to close
// everything, dumping the servers' log tails when the test failed.
//
// VerifyTestMain is goleak.VerifyTestMain that first lets rueidis' bounded
// background goroutines (cluster topology refresh) finish.
//
// Standalone honours REDIS_ADDR: when it is set, the returned Server points at
// that existing server and Close, Restart and Kill do not touch it. When
// redis-server is not on PATH but a Docker engine answers, Standalone and
// Masters fall back to testcontainers-go's Redis module, through the
// program in tools/redisdocker (a module of its own, so that the library's
// go.mod does not carry Docker's requirements).
package redistest
