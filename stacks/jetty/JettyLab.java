import java.io.IOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;

import org.eclipse.jetty.server.HttpConnectionFactory;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import org.eclipse.jetty.unixdomain.server.UnixDomainServerConnector;

/**
 * uds-lab's Jetty stack: one Jetty 12 Server, one handler (Routes), two
 * connectors: a ServerConnector on APP_TCP_ADDR and a
 * UnixDomainServerConnector on APP_UNIX_SOCKET (Java 16+ Unix-domain
 * channels). A bad setting stops the start naming it, before anything
 * listens (exit 2); SIGTERM drains the requests in flight on both and exits 0.
 */
public final class JettyLab {
    static final int BACKLOG = 1024; // each listener's accept queue (the kernel caps it at somaxconn)
    // A kept connection idle this long is closed: longer than nginx's upstream
    // keepalive_timeout (60 s), so nginx closes it first and never sends on a
    // connection the app is closing (Jetty's default is 30 s).
    static final long IDLE_TIMEOUT_MS = 75_000;
    static final long SHUTDOWN_MS = 15_000; // SIGTERM drains requests in flight this long (compose gives 20 s)

    private JettyLab() {
    }

    public static void main(String[] args) {
        Settings settings;
        try {
            settings = Settings.read(System.getenv());
        } catch (Settings.Bad e) {
            System.err.println("jetty stack: " + e.getMessage());
            System.exit(2);
            return;
        }
        try {
            run(settings);
        } catch (Exception e) {
            System.err.println("jetty stack: " + e.getMessage());
            System.exit(1);
        }
    }

    static void run(Settings s) throws Exception {
        removeStale(s.socket());
        Server server = new Server();
        Routes routes = new Routes();
        server.setHandler(routes);
        // Jetty's is 0: its stop cuts the requests in flight.
        server.setStopTimeout(SHUTDOWN_MS);

        ServerConnector tcp = new ServerConnector(server, new HttpConnectionFactory());
        tcp.setHost(s.host().isEmpty() ? null : s.host());
        tcp.setPort(s.port());
        tcp.setAcceptQueueSize(BACKLOG);
        tcp.setIdleTimeout(IDLE_TIMEOUT_MS);
        tcp.setAcceptedTcpNoDelay(true); // Jetty's default, kept: no answer waits for a delayed ACK
        UnixDomainServerConnector unix = new UnixDomainServerConnector(server, new HttpConnectionFactory());
        unix.setUnixDomainPath(s.socket());
        unix.setAcceptQueueSize(BACKLOG);
        unix.setIdleTimeout(IDLE_TIMEOUT_MS);
        server.addConnector(tcp);
        server.addConnector(unix);

        try {
            server.start();
        } catch (Exception e) {
            server.stop();
            throw new IOException("cannot listen on APP_TCP_ADDR=\"" + s.host() + ":" + s.port()
                    + "\" and APP_UNIX_SOCKET=\"" + s.socket() + "\": " + e.getMessage(), e);
        }
        try {
            setModeAndGroup(s);
        } catch (IOException e) {
            server.stop(); // the socket file goes with it
            throw e;
        }
        System.err.printf("jetty stack: listening on %s:%d and %s (mode %o)%n",
                s.host().isEmpty() ? "*" : s.host(), s.port(), s.socket(), s.mode());

        // SIGTERM (Docker's stop) or SIGINT runs this hook: both connectors
        // stop accepting, the requests in flight are answered (SHUTDOWN_MS
        // at most), idle kept connections close, and Jetty removes the
        // socket file. The JVM would then exit 143 (128 + SIGTERM) whatever
        // the hook did: halt() exits with the stop's code.
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            System.err.println("jetty stack: stopping: draining requests in flight");
            routes.draining.set(true);
            int code = 0;
            try {
                server.stop();
            } catch (Exception e) {
                System.err.println("jetty stack: the stop: " + e);
                code = 1;
            }
            Runtime.getRuntime().halt(code);
        }, "stop"));
        server.join(); // returns as the hook stops the server; the hook ends the JVM
    }

    /**
     * A socket file left by a crash is removed; one a live process answers
     * on, or a file that is no socket, stops the start (as the Go app).
     * Jetty's bind() would fail with "Address already in use" on either.
     */
    static void removeStale(Path path) throws IOException {
        if (!Files.exists(path, LinkOption.NOFOLLOW_LINKS)) {
            return;
        }
        int mode = (Integer) Files.getAttribute(path, "unix:mode", LinkOption.NOFOLLOW_LINKS);
        if ((mode & 0170000) != 0140000) {
            throw new IOException("APP_UNIX_SOCKET=\"" + path + "\": exists and is not a socket");
        }
        if (answers(path)) {
            throw new IOException("APP_UNIX_SOCKET=\"" + path + "\": another process is listening on it");
        }
        Files.delete(path);
    }

    static boolean answers(Path socket) {
        try (SocketChannel c = SocketChannel.open(StandardProtocolFamily.UNIX)) {
            return c.connect(UnixDomainSocketAddress.of(socket));
        } catch (IOException refused) {
            return false;
        }
    }

    /**
     * The socket's mode and group. Java cannot set the umask, so bind() makes
     * the socket with the process's (0755 under Docker's default: only the
     * owner may connect, since connecting needs write permission); the mode
     * is set right after, the group to APP_SOCKET_GID when set (else the
     * process's: in compose APP_GID, nginx workers').
     */
    static void setModeAndGroup(Settings s) throws IOException {
        Set<PosixFilePermission> perms = EnumSet.noneOf(PosixFilePermission.class);
        PosixFilePermission[] bits = {
            PosixFilePermission.OTHERS_EXECUTE, PosixFilePermission.OTHERS_WRITE, PosixFilePermission.OTHERS_READ,
            PosixFilePermission.GROUP_EXECUTE, PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_READ,
            PosixFilePermission.OWNER_EXECUTE, PosixFilePermission.OWNER_WRITE, PosixFilePermission.OWNER_READ,
        };
        for (int i = 0; i < bits.length; i++) {
            if ((s.mode() & (1 << i)) != 0) {
                perms.add(bits[i]);
            }
        }
        Files.setPosixFilePermissions(s.socket(), perms);
        if (s.gid() != null) {
            try {
                Files.setAttribute(s.socket(), "unix:gid", s.gid(), LinkOption.NOFOLLOW_LINKS);
            } catch (IOException e) {
                throw new IOException("APP_SOCKET_GID=\"" + s.gid() + "\": cannot give the socket that group: " + e, e);
            }
        }
    }
}
