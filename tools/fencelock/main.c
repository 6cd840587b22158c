#include "fencelock.h"
int main(void){return 0;}
