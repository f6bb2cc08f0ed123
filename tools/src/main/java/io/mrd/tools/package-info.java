/**
 * What is read from outside a daemon, for people and for tests: a consistent copy of a control file
 * ({@code ControlFileSnapshot}), the properties every control file must have ({@code Invariants}), and how
 * the tools write addresses, keys, sizes and owners ({@code Format}). Aeron keeps {@code AeronStat} and
 * {@code CncFileReader} out of its client in the same way.
 * <p>
 * Belongs here: code that reads a control file without taking part in the protocol, used by the {@code mrd}
 * commands and by the tests. Does not belong here: anything the daemon or a client needs to run (no module
 * but {@code cli} depends on this one at compile scope; {@code primary} never does), and the picocli commands
 * themselves, which are in {@code io.mrd.cli}.
 */
package io.mrd.tools;
