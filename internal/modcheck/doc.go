// Package modcheck holds a test that keeps the library's module lean: its
// go.mod requires only what the library imports (rueidis, uuid) and its
// test libraries, and its packages import nothing else.
package modcheck
