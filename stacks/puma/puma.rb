# puma's settings for uds-lab, from the lab's APP_* settings.
#
# One puma master, PUMA_WORKERS forked workers of PUMA_THREADS threads each,
# two binds: TCP (APP_TCP_ADDR) and the Unix socket (APP_UNIX_SOCKET). A bad
# value stops puma with a message naming it, before it listens anywhere.

require "socket"
require_relative "app"

lab_setting = ->(name, default) { ENV[name].to_s.empty? ? default : ENV[name] }
lab_fail = lambda do |msg|
  warn "puma stack: #{msg}"
  exit 2
end
lab_count = lambda do |name, default|
  v = lab_setting.call(name, default)
  lab_fail.call(%(#{name}="#{v}": must be a whole number >= 1)) unless v.match?(/\A[0-9]+\z/) && v.to_i >= 1
  v.to_i
end

tcp = lab_setting.call("APP_TCP_ADDR", ":8080")
host, _, port = tcp.rpartition(":")
unless port.match?(/\A[0-9]+\z/) && port.to_i.between?(1, 65_535)
  lab_fail.call(%(APP_TCP_ADDR="#{tcp}": must be host:port or :port))
end
host = "0.0.0.0" if host.empty?
host = "[#{host}]" if host.include?(":") && !host.start_with?("[")

# The socket file's mode is its access control. puma sets the umask of a
# unix:// bind around bind(), so the socket is born with this mode; its group
# is the process's (in compose APP_GID, nginx workers'). The lab's one rule
# for it (contract/socket-modes.json): read and write for the owner (the app)
# and the group (nginx's), nothing for others.
mode_s = lab_setting.call("APP_SOCKET_MODE", "0660")
digits = mode_s.delete_prefix("0o")
unless digits.match?(/\A[0-7]+\z/)
  lab_fail.call(%(APP_SOCKET_MODE="#{mode_s}": must be an octal permission such as 0660))
end
mode = digits.to_i(8)
why = if mode > 0o777
        "must not set bits beyond 0777 (setuid/setgid/sticky are meaningless on a socket)"
      elsif mode & 0o007 != 0
        "must give others nothing (any local user could connect); use 0660 and APP_SOCKET_GID"
      elsif mode & 0o060 != 0o060
        "must give the group read and write (nginx's group connects through it)"
      elsif mode & 0o600 != 0o600
        "must give the owner read and write (connecting needs write permission)"
      end
lab_fail.call(%(APP_SOCKET_MODE="#{mode_s}": #{why})) if why
gid_s = ENV["APP_SOCKET_GID"].to_s
lab_fail.call(%(APP_SOCKET_GID="#{gid_s}": must be a numeric group id)) unless gid_s.empty? || gid_s.match?(/\A[0-9]+\z/)
workers_n = lab_count.call("PUMA_WORKERS", "4")
threads_n = lab_count.call("PUMA_THREADS", "5")

# A socket file left by a crash is removed here if nothing answers on it; one
# a live process answers on, or a file that is no socket, stops the start.
# (puma's binder would remove a dead one too, but then leave the socket it
# makes behind at stop: it removes only the paths that did not exist before.)
# Not on puma's own hot restart, which inherits the listening socket.
socket_path = lab_setting.call("APP_UNIX_SOCKET", "/sock/app.sock")
if ENV.keys.none? { |k| k.start_with?("PUMA_INHERIT_") } && File.exist?(socket_path)
  lab_fail.call(%(APP_UNIX_SOCKET="#{socket_path}": exists and is not a socket)) unless File.socket?(socket_path)
  live = begin
    UNIXSocket.new(socket_path).close
    true
  rescue SystemCallError
    false
  end
  lab_fail.call(%(APP_UNIX_SOCKET="#{socket_path}": another process is listening on it)) if live
  File.unlink(socket_path)
end

bind "tcp://#{host}:#{port}"
# puma reads umask with Integer(), so the leading 0 makes it octal.
bind format("unix://%<path>s?umask=0%<umask>03o", path: socket_path, umask: 0o777 & ~mode)

# Cluster mode, always: the master binds, then forks the workers, and
# APP_SOCKET_GID is applied between the two (before_fork runs in the master).
workers workers_n
threads threads_n, threads_n
unless gid_s.empty?
  before_fork { File.chown(nil, gid_s.to_i, socket_path) }
end
# The workers share the payload built at load.
preload_app!
app LabApp
environment "production"

# Idle connections outlive nginx's (keepalive_timeout 60s), so nginx never
# sends on a connection puma has just closed (puma's default is 20 s).
persistent_timeout 120
# SIGTERM is a graceful stop: the workers stop accepting, finish requests in
# flight (for 15 s at most; compose gives 20) and exit, and the master exits
# 0 (not by re-raising SIGTERM), removing the socket it made.
raise_exception_on_sigterm false
worker_shutdown_timeout 15
force_shutdown_after 15
# No request log: it would cost every request its own write.
quiet
