// Package systemtest holds the tests of the whole service: the real binary (built and started
// by internal/servicetest) over real HTTP against a real PostgreSQL, every expected answer
// computed with SQL over the loaded rows. Tests of one package's behaviour sit beside that
// package; these are the ones that need the service assembled.
//
// Contract 6.10's one-minute measure (TestOneCallerCannotTakeItDown) runs only with the build
// tag measure: make test-measure.
package systemtest
