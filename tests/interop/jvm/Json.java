// One JSON line per report, without a library on the classpath: ClientScenarios,
// matrix/MatrixDriver and security/SecurityScenarios print their results with it.
import java.util.Collection;
import java.util.Map;

final class Json {
    private Json() {}

    /** Print one report line and flush it, whichever thread reports. */
    static synchronized void emit(Map<String, Object> line) {
        System.out.println(of(line));
        System.out.flush();
    }

    /** An error and its causes, one per line, with up to six frames of `program`. */
    static String describe(Throwable error, String program) {
        StringBuilder text = new StringBuilder();
        int depth = 0;
        for (Throwable t = error; t != null && depth < 6; t = t.getCause(), depth++) {
            text.append(depth == 0 ? "" : "caused by ").append(t.getClass().getName())
                    .append(": ").append(t.getMessage()).append('\n');
        }
        int shown = 0;
        for (StackTraceElement frame : error.getStackTrace()) {
            if (frame.getClassName().startsWith(program) && shown++ < 6) {
                text.append("  at ").append(frame).append('\n');
            }
        }
        return text.toString().strip();
    }

    static String of(Object value) {
        StringBuilder out = new StringBuilder();
        writeJson(out, value);
        return out.toString();
    }

    private static void writeJson(StringBuilder out, Object value) {
        if (value == null) {
            out.append("null");
        } else if (value instanceof Boolean || value instanceof Integer || value instanceof Long) {
            out.append(value);
        } else if (value instanceof Number number) {
            double d = number.doubleValue();
            out.append(Double.isFinite(d) ? Double.toString(d) : "null");
        } else if (value instanceof Map<?, ?> map) {
            out.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> entry : map.entrySet()) {
                if (!first) {
                    out.append(',');
                }
                first = false;
                writeString(out, String.valueOf(entry.getKey()));
                out.append(':');
                writeJson(out, entry.getValue());
            }
            out.append('}');
        } else if (value instanceof Collection<?> items) {
            out.append('[');
            boolean first = true;
            for (Object item : items) {
                if (!first) {
                    out.append(',');
                }
                first = false;
                writeJson(out, item);
            }
            out.append(']');
        } else {
            writeString(out, value.toString());
        }
    }

    private static void writeString(StringBuilder out, String text) {
        out.append('"');
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            if (c == '"' || c == '\\') {
                out.append('\\').append(c);
            } else if (c < 0x20 || c > 0x7e) {
                out.append(String.format("\\u%04x", (int) c));
            } else {
                out.append(c);
            }
        }
        out.append('"');
    }
}
