/**
 * What is read from outside a daemon, for people and for tests: whether a run directory has a daemon and
 * what its header says ({@code RunDirectoryReader}, {@code DaemonSummary}), a consistent copy of a whole
 * control file ({@code ControlFileSnapshot}), the properties every control file must have
 * ({@code Invariants}), the counters and histograms as Prometheus text ({@code MetricsText},
 * {@code PublishedHistogram}), the journal ({@code JournalReader}), and how the tools write addresses, keys,
 * sizes and owners ({@code Format}). Aeron keeps {@code AeronStat} and {@code CncFileReader} out of its driver
 * and its client in the same way.
 * <p>
 * Belongs here: code that reads a control file, a journal or a run directory without taking part in the
 * protocol, used by the {@code mrd} commands, by the tests, and by the daemon where it shows itself as the
 * tools show it (its {@code /metrics}, the pid it names when it finds a directory taken or a dead daemon's
 * files). Does not belong here: anything that writes a control file or changes a run directory (that is the
 * daemon's), anything a client needs to run, and the picocli commands themselves, which are in
 * {@code io.mrd.cli}. This module depends on {@code shared-layout} alone, never on {@code primary}.
 */
package io.mrd.tools;
