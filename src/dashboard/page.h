// The dashboard's page and script, compiled into the binary (one `zaya`, nothing to install
// beside it but Debian's Chart.js).
#pragma once
#include <string_view>

namespace zaya::dashboard {

std::string_view page_html();
std::string_view page_js();

}  // namespace zaya::dashboard
