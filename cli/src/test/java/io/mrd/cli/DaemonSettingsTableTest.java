package io.mrd.cli;

import io.mrd.primary.DaemonSetting;
import io.mrd.primary.DaemonSettings;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The settings tables written by hand, the full one in {@code docs/operations.md} and the README's main ones, name
 * the settings as the rows of {@link DaemonSettings} do: every row is in the full table with its option and its
 * variable on one line, and no line of either table names an option or a variable that is not a row's, or pairs
 * an option with another row's variable. The defaults are left to {@code mrd start --help}, which prints each
 * row's own.
 */
final class DaemonSettingsTableTest
{
    private static final Pattern OPTION = Pattern.compile("`--(?:\\[no-])?([a-z][a-z-]*)`");
    private static final Pattern VARIABLE = Pattern.compile("`(MRD_[A-Z_]+)`");

    @Test
    void theFullTableHasEveryRow() throws IOException
    {
        final List<String> lines = tableLines(ProjectRoot.path().resolve("docs/operations.md"));
        final List<String> missing = new ArrayList<>();
        for (final DaemonSetting<?> setting : DaemonSettings.all())
        {
            final boolean found = lines.stream().anyMatch(line ->
                line.contains("`" + setting.variable() + "`") &&
                (null == setting.option() ? line.startsWith("| — |") : options(line).contains(setting.option())));
            if (!found)
            {
                missing.add(setting.displayName() + " / " + setting.variable());
            }
        }
        assertEquals(List.of(), missing, "settings missing from docs/operations.md's table (add a line each)");
    }

    @Test
    void bothTablesNameOnlyRowsAndPairThemRight() throws IOException
    {
        final List<String> wrong = new ArrayList<>();
        for (final Path file : List.of(ProjectRoot.path().resolve("docs/operations.md"),
            ProjectRoot.path().resolve("README.md")))
        {
            for (final String line : tableLines(file))
            {
                final List<String> options = options(line);
                final List<String> variables = variables(line);
                for (int i = 0; i < options.size(); i++)
                {
                    final String option = options.get(i);
                    final DaemonSetting<?> setting = DaemonSettings.all().stream()
                        .filter(row -> option.equals(row.option())).findFirst().orElse(null);
                    if (null == setting)
                    {
                        wrong.add(file.getFileName() + ": " + option + " is no setting: " + line);
                    }
                    else if (i >= variables.size() || !setting.variable().equals(variables.get(i)))
                    {
                        wrong.add(file.getFileName() + ": " + option + " goes with " + setting.variable() + ": " +
                            line);
                    }
                }
                for (final String variable : variables)
                {
                    if (DaemonSettings.all().stream().noneMatch(row -> variable.equals(row.variable())))
                    {
                        wrong.add(file.getFileName() + ": " + variable + " is no setting's variable: " + line);
                    }
                }
            }
        }
        assertEquals(List.of(), wrong);
    }

    /** The lines of the file's settings tables: those whose first cell is an option or "—" and which name a variable. */
    private static List<String> tableLines(final Path file) throws IOException
    {
        final List<String> lines = Files.readAllLines(file).stream()
            .filter(line -> (line.startsWith("| `--") || line.startsWith("| — |")) && line.contains("`MRD_"))
            .toList();
        assertTrue(!lines.isEmpty(), file + " has no settings table");
        return lines;
    }

    /** The options of a line's first cell, in order, as {@code --name}. */
    private static List<String> options(final String line)
    {
        return all(OPTION, firstCell(line)).stream().map(name -> "--" + name).toList();
    }

    /** The variables of a line's second cell, in order. */
    private static List<String> variables(final String line)
    {
        final String[] cells = line.split("\\|");
        return cells.length > 2 ? all(VARIABLE, cells[2]) : List.of();
    }

    private static String firstCell(final String line)
    {
        final String[] cells = line.split("\\|");
        return cells.length > 1 ? cells[1] : "";
    }

    private static List<String> all(final Pattern pattern, final String text)
    {
        final List<String> found = new ArrayList<>();
        final Matcher matcher = pattern.matcher(text);
        while (matcher.find())
        {
            found.add(matcher.group(1));
        }
        return found;
    }
}
