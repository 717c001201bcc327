// Hosts on one machine, for multi-host tests: each host is a network namespace with its own host
// name (host1, host2, ...) and address (10.77.0.K on eth0), joined by veth pairs to a bridge in a
// further namespace (the switch), so that they talk TCP as machines on one network do. OpenMPI
// starts ranks on them through the rsh agent this writes (`nsenter --net` where ssh would be).
//
// Creating namespaces needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) and the ip command (iproute2,
// which ./scripts/setup installs); without them the test skips, saying why. The namespaces, their
// links and the processes left in them are removed when the object goes.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

namespace linattn::testing {

class NetnsHosts {
 public:
  // `hosts` hosts; the scripts and the set-up log go in `dir`, which must exist.
  NetnsHosts(int hosts, const std::string& dir) : hosts_(hosts), dir_(dir), prefix_("lh" + std::to_string(getpid())) {
    if (geteuid() != 0) {
      why_not_ = "the multi-host test makes network namespaces, which needs root (CI runs it as root)";
      return;
    }
    if (std::system("command -v ip > /dev/null") != 0) {
      why_not_ = "the multi-host test needs the ip command: install iproute2 (./scripts/setup does)";
      return;
    }
    // `nsenter --net` where `ip -n` and `ip netns exec` would do: those also remount / and /sys,
    // which fails in a chroot (the fresh root of CI) and is not needed here.
    std::ostringstream up;
    up << "set -e\nip netns add " << ns(0) << "\n" << in(0) << "ip link add br0 type bridge\n" << in(0)
       << "ip link set br0 up\n";
    for (int k = 1; k <= hosts_; ++k) {
      const std::string a = prefix_ + "a" + std::to_string(k), b = prefix_ + "b" + std::to_string(k);
      up << "ip netns add " << ns(k) << "\nip link add " << a << " type veth peer name " << b << "\nip link set " << a
         << " netns " << ns(k) << "\nip link set " << b << " netns " << ns(0) << "\n"
         << in(k) << "ip link set " << a << " name eth0\n"
         << in(k) << "ip addr add " << address(k) << "/24 dev eth0\n"
         << in(k) << "ip link set eth0 up\n"
         << in(k) << "ip link set lo up\n"
         << in(0) << "ip link set " << b << " master br0\n"
         << in(0) << "ip link set " << b << " up\n";
    }
    write_script("up", up.str());
    // on-host K COMMAND...: COMMAND on hostK (its network, its host name).
    write_script("on-host", "k=$1; shift\nexec nsenter --net=/run/netns/" + prefix_ +
                                "-h$k unshare --uts sh -c 'hostname \"host$0\" && exec \"$@\"' \"$k\" \"$@\"\n");
    // OpenMPI's rsh agent: AGENT HOST WORDS..., the words a command line for a shell, as ssh runs it.
    write_script("agent", "host=$1; shift\nexec " + dir_ + "/on-host \"${host#host}\" sh -c \"$*\"\n");
    created_ = true;  // from here on the destructor removes whatever was made
    if (std::system((dir_ + "/up > " + dir_ + "/up.log 2>&1").c_str()) != 0) {
      std::ifstream log(dir_ + "/up.log");
      why_not_ = "cannot make network namespaces here: " + std::string(std::istreambuf_iterator<char>(log), {});
    }
  }
  ~NetnsHosts() {
    if (!created_) return;
    for (int k = 0; k <= hosts_; ++k) {
      const std::string n = ns(k);
      std::system(("(ip netns pids " + n + " | xargs -r kill -KILL; ip netns del " + n + ") > /dev/null 2>&1").c_str());
    }
  }
  NetnsHosts(const NetnsHosts&) = delete;
  NetnsHosts& operator=(const NetnsHosts&) = delete;

  bool ready() const { return why_not_.empty(); }
  const std::string& why_not() const { return why_not_; }

  // mpirun started on host1 with one rank on each of the first `ranks` hosts, over TCP only (no shared
  // memory between hosts), with the environment variables `exported` passed to every rank.
  std::string mpirun(int ranks, const std::string& exported = "") const {
    std::string hosts;
    for (int k = 1; k <= ranks; ++k) hosts += (k > 1 ? ",host" : "host") + std::to_string(k) + ":1";
    std::string cmd = dir_ + "/on-host 1 mpirun --host " + hosts + " -np " + std::to_string(ranks) +
                      " --mca plm_rsh_agent " + dir_ + "/agent --mca btl tcp,self --mca btl_tcp_if_include " +
                      subnet() + " --mca oob_tcp_if_include " + subnet() + " " + keepalive();
    if (!exported.empty()) cmd += " -x " + exported;
    return cmd + " ";
  }
  // The processes named `name` on hostK.
  std::string pids(int k, const std::string& name) const {
    std::string out;
    FILE* p = popen(("for p in $(ip netns pids " + ns(k) + "); do [ \"$(cat /proc/$p/comm 2>/dev/null)\" = '" + name +
                     "' ] && echo $p; done").c_str(),
                    "r");
    for (int c; p && (c = fgetc(p)) != EOF;) out += char(c);
    if (p) pclose(p);
    return out;
  }
  // Takes hostK's link down, as a pulled cable.
  bool cut_link(int k) const { return std::system((in(k) + "ip link set eth0 down").c_str()) == 0; }

  // OpenMPI notices a daemon it cannot reach after 5 s of silence and three unanswered probes a
  // second apart (TCP keepalive on its control connections; the default is 8 minutes).
  static std::string keepalive() {
    return "--mca oob_tcp_keepalive_time 5 --mca oob_tcp_keepalive_intvl 1 --mca oob_tcp_keepalive_probes 3";
  }

 private:
  std::string ns(int k) const { return prefix_ + (k == 0 ? std::string("-switch") : "-h" + std::to_string(k)); }
  // The prefix that runs a command in hostK's network (0: the switch's).
  std::string in(int k) const { return "nsenter --net=/run/netns/" + ns(k) + " "; }
  static std::string address(int k) { return "10.77.0." + std::to_string(k); }
  static std::string subnet() { return "10.77.0.0/24"; }
  void write_script(const std::string& name, const std::string& body) const {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << "#!/bin/sh\n" << body;
    std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  }

  int hosts_;
  std::string dir_, prefix_, why_not_;
  bool created_ = false;
};

}  // namespace linattn::testing
