# Layer: a web browser and the tools agents reach for. The point of a box is that an agent
# builds an app and then looks at it: Debian's chromium is the desktop's default browser
# (xdg-open, x-www-browser, the panel's launcher), Thunar its file manager and Mousepad
# its editor (so XFCE never opens a chooser dialog), and Playwright for Python and Node (`playwright-core`) is
# installed without a browser of its own: scripts launch /usr/bin/chromium
# (`executable_path`), never a downloaded one. apt's package lists stay, so
# `sudo apt-get install X` works in a box that can reach the archive.
ARG FROM
FROM ${FROM}
ARG PLAYWRIGHT_VERSION=1.65.1
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      chromium fonts-liberation thunar mousepad xdg-utils exo-utils \
      ripgrep htop python3-pytest \
 && apt-get clean
RUN update-alternatives --set x-www-browser /usr/bin/chromium \
 && mkdir -p /etc/xdg/xfce4 \
 && printf 'WebBrowser=chromium\nFileManager=thunar\nTerminalEmulator=xfce4-terminal\n' \
      > /etc/xdg/xfce4/helpers.rc \
 && printf '[Default Applications]\ntext/html=chromium.desktop\nx-scheme-handler/http=chromium.desktop\nx-scheme-handler/https=chromium.desktop\ninode/directory=thunar.desktop\ntext/plain=org.xfce.mousepad.desktop\n' \
      > /etc/xdg/mimeapps.list
# Playwright: the libraries only (PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD, and Python's package
# never downloads until asked). pip installs into the box's system Python on purpose:
# this is the box's own computer, and agents run plain `python3`.
ENV PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 PADDOCK_CHROMIUM=/usr/bin/chromium
RUN pip install --no-cache-dir --quiet --break-system-packages "playwright==${PLAYWRIGHT_VERSION}" \
 && npm install -g --no-fund --no-audit --loglevel=error "playwright-core@${PLAYWRIGHT_VERSION}" \
 && npm cache clean --force
