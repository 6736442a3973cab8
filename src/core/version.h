// core/version: dlperf's version string.
#ifndef DLP_CORE_VERSION_H
#define DLP_CORE_VERSION_H
#define DLP_VERSION "0.1.0"
#endif
