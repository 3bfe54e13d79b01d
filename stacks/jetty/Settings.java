import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Map;

/**
 * The lab's settings, read from the environment with the lab's defaults and
 * checked before anything listens: a bad one stops the start with one line
 * naming it (stacks/README.md).
 */
record Settings(String host, int port, Path socket, int mode, Integer gid) {

    /** A setting that is wrong: its message names the setting and the value. */
    static final class Bad extends Exception {
        private static final long serialVersionUID = 1L;

        Bad(String name, String value, String why) {
            super(name + "=\"" + value + "\": " + why);
        }
    }

    /** Unix-domain paths are limited by sockaddr_un's sun_path (108 bytes, with its NUL). */
    static final int MAX_SOCKET_PATH = 107;

    static Settings read(Map<String, String> env) throws Bad {
        String tcp = value(env, "APP_TCP_ADDR", ":8080");
        int colon = tcp.lastIndexOf(':');
        if (colon < 0) {
            throw new Bad("APP_TCP_ADDR", tcp, "must be host:port or :port");
        }
        String host = tcp.substring(0, colon);
        if (host.startsWith("[") && host.endsWith("]")) {
            host = host.substring(1, host.length() - 1);
        }
        int port = port(tcp, tcp.substring(colon + 1));

        String socket = value(env, "APP_UNIX_SOCKET", "/sock/app.sock");
        if (socket.getBytes(StandardCharsets.UTF_8).length > MAX_SOCKET_PATH) {
            throw new Bad("APP_UNIX_SOCKET", socket, "longer than " + MAX_SOCKET_PATH + " bytes, a Unix socket's limit");
        }
        String modeText = value(env, "APP_SOCKET_MODE", "0660");
        String why = socketModeProblem(modeText);
        if (why != null) {
            throw new Bad("APP_SOCKET_MODE", modeText, why);
        }
        int mode = Integer.parseInt(modeText.startsWith("0o") ? modeText.substring(2) : modeText, 8);

        Integer gid = null;
        String gidText = env.getOrDefault("APP_SOCKET_GID", "");
        if (!gidText.isEmpty()) {
            if (!gidText.chars().allMatch(Character::isDigit) || gidText.length() > 9) {
                throw new Bad("APP_SOCKET_GID", gidText, "must be a numeric group id");
            }
            gid = Integer.parseInt(gidText);
        }
        return new Settings(host, port, Path.of(socket), mode, gid);
    }

    private static String value(Map<String, String> env, String name, String fallback) {
        String v = env.get(name);
        return v == null || v.isEmpty() ? fallback : v;
    }

    private static int port(String tcp, String digits) throws Bad {
        if (digits.isEmpty() || digits.length() > 5 || !digits.chars().allMatch(c -> c >= '0' && c <= '9')) {
            throw new Bad("APP_TCP_ADDR", tcp, "must be host:port or :port");
        }
        int port = Integer.parseInt(digits);
        if (port < 1 || port > 65535) {
            throw new Bad("APP_TCP_ADDR", tcp, "the port must be between 1 and 65535");
        }
        return port;
    }

    /**
     * The lab's one rule for the socket's mode (contract/socket-modes.json):
     * read and write for the owner (the app) and the group (nginx's), nothing
     * for others. Null for a mode kept, or why it is refused.
     */
    static String socketModeProblem(String text) {
        String digits = text.startsWith("0o") ? text.substring(2) : text;
        if (digits.isEmpty() || !digits.chars().allMatch(c -> c >= '0' && c <= '7')) {
            return "must be an octal permission such as 0660";
        }
        if (digits.length() > 11 || Long.parseLong(digits, 8) > 0777) {
            return "must not set bits beyond 0777 (setuid/setgid/sticky are meaningless on a socket)";
        }
        int m = Integer.parseInt(digits, 8);
        if ((m & 0007) != 0) {
            return "must give others nothing (any local user could connect); use 0660 and APP_SOCKET_GID";
        }
        if ((m & 0060) != 0060) {
            return "must give the group read and write (nginx's group connects through it)";
        }
        if ((m & 0600) != 0600) {
            return "must give the owner read and write (connecting needs write permission)";
        }
        return null;
    }
}
