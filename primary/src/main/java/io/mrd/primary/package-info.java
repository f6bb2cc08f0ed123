/**
 * The daemon (the primary): {@code MrdDaemon} orders start and shutdown, {@code DaemonSettings} has a row for
 * every setting ({@code DaemonSetting}) and {@code DaemonContext} their values, {@code RunDirectory} owns the
 * run directory (its lock, stale files), {@code DaemonCounters} the counters in the control file, and the
 * metrics endpoint serves them as the tools' {@code MetricsText} renders them.
 * <p>
 * What belongs here: the daemon's lifecycle and what every part of it shares. What does not: the work itself,
 * which lives in the sub-packages, each with its own locks ({@code memory}, {@code mr}, {@code external},
 * {@code provider}, {@code server}); anything the secondaries or tools read, which is {@code shared-layout}'s;
 * and what reads a control file or a run directory from outside, which is {@code tools}' (the daemon uses
 * that too, never the reverse).
 */
package io.mrd.primary;
