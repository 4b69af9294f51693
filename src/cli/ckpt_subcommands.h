// Subcommands of `zaya ckpt` defined in other files of src/cli/ (e.g. ckpt_reshape.cpp):
// a file registers one with a static ZAYA_CKPT_SUBCOMMAND; ckpt.cpp adds every entry
// to the `ckpt` command when main() builds the CLI. The setup function receives the
// already-created subcommand and adds its options and a callback.
//
//   ZAYA_CKPT_SUBCOMMAND("reshape", "change the layout of a checkpoint", [](CLI::App& app) {
//     auto src = std::make_shared<std::string>();
//     app.add_option("src", *src)->required();
//     app.callback([=] { ... });
//   });
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "cli/command.h"

namespace zaya::cli {

struct CkptSubcommand {
  std::string name, help;
  std::function<void(CLI::App&)> setup;
};

std::vector<CkptSubcommand>& ckpt_subcommands();  // defined in ckpt.cpp

struct CkptSubcommandRegistrar {
  CkptSubcommandRegistrar(std::string name, std::string help, std::function<void(CLI::App&)> setup) {
    ckpt_subcommands().push_back({std::move(name), std::move(help), std::move(setup)});
  }
};

}  // namespace zaya::cli

#define ZAYA_CKPT_SUBCOMMAND(name, help, setup) \
  static ::zaya::cli::CkptSubcommandRegistrar ZAYA_CAT(zaya_ckpt_cmd_, __LINE__)(name, help, setup)
