// Package deploytest checks the shipped deployment files (deploy/) the way their runtimes read
// them, on a machine without those runtimes (no Docker engine, no systemd as PID 1, no
// Kubernetes cluster): the compose files through the compose library, the systemd unit through a
// unit-file parser and an unprivileged user, the Helm chart through the helm binary, the
// dashboard and alert rules against the metrics a running service exports and through promtool's
// rule tests. Each test that runs the real service binary runs it against a real PostgreSQL
// (internal/pgtest) and names, in its comment, what it emulates and how.
//
// A test that needs a component it cannot find (PostgreSQL, psql, PgBouncer, helm, promtool,
// root for the systemd test's other user) skips on a developer's machine and fails when CI is set, as
// internal/pgtest does. The one exception is systemd-analyze, an extra reading of the unit's
// syntax where Debian's systemd package is installed; TestSystemd checks the unit without it.
package deploytest
